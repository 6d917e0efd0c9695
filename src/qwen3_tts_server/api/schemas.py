"""What every route shares in its OpenAPI schema: OpenAI's error document, a route's success, and the upload
limits."""

from __future__ import annotations

from pydantic import BaseModel, Field

MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # OpenAI's limit for a voice's audio sample
# The routes that take a recording to transcribe, whose uploads may be MAX_TRANSCRIPTION_BYTES (not 10 MiB).
TRANSCRIPTION_PATHS = (
    "/v1/audio/transcriptions",
    "/v1/audio/transcriptions/stream",
    "/v1/audio/translations",
    "/v1/audio/subtitles",
)
RAW_AUDIO_PATHS = ("/v1/listen",)  # routes whose body is a recording, not a form (Deepgram's)


def answers(description: str, *media_types: str) -> dict[int | str, dict]:
    """A route's success for its OpenAPI schema (FastAPI's `responses`): `description`, in any of `media_types`."""
    return {200: {"description": description, "content": {media_type: {} for media_type in media_types}}}


class ErrorObject(BaseModel):
    """OpenAI's error object: what its SDKs read."""

    message: str
    type: str = Field(description="invalid_request_error, not_found_error, server_error, ...: from the status")
    param: str | None = Field(description="the request field at fault, if one is")
    code: str | None = Field(description="what failed, as a snake_case code (unknown_voice, queue_full, ...)")


class ErrorDocument(BaseModel):
    """Every failure's body: OpenAI's envelope, with the earlier server's flat keys beside it (what its clients
    read)."""

    error: ErrorObject
    code: str = Field(description="the earlier server's code: UNKNOWN_VOICE, QUEUE_FULL, or the status's name")
    message: str
    statusCode: int  # noqa: N815 (the earlier server's key)
    context: dict | None = Field(description="details where there are some (valid_voices for an unknown voice)")
