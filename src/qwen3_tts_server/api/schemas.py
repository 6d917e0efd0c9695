"""Request bodies of the OpenAI-compatible API (unknown extra fields are accepted: clients send
extensions through `extra_body`)."""

from __future__ import annotations

from typing import Literal

from fastapi import UploadFile
from pydantic import BaseModel, ConfigDict, Field

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw"]
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # OpenAI's limit for a voice's audio sample


class VoiceId(BaseModel):
    id: str


class SpeechOptions(BaseModel):
    """Everything about a speech request but the voice."""

    model: str = "tts-1"
    input: str = Field(max_length=4096)
    instructions: str | None = Field(default=None, max_length=4096)
    response_format: ResponseFormat = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    # Extensions.
    stream: bool = True  # false: the whole file at once, with Content-Length and latency headers
    language: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    sample_rate: int | None = None
    normalize: bool | None = None  # numbers, dates, symbols... in words; None: the server's TEXT_NORMALIZE
    include_text: bool = False  # report the spoken (normalised) text: X-Spoken-Text, or a speech.text SSE event


class SpeechRequest(SpeechOptions):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {"model": "tts-1", "input": "Hello there.", "voice": "alloy"},
                {"input": "Hola.", "voice": "vivian", "response_format": "wav", "speed": 1.5, "language": "Spanish"},
            ]
        },
    )

    voice: str | VoiceId

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceId) else self.voice


class CloneSpeechForm(SpeechOptions):
    """POST /v1/audio/speech/clone (multipart): speech in a voice cloned from inline reference audio."""

    ref_audio: UploadFile = Field(description=f"reference recording, at most {MAX_UPLOAD_BYTES >> 20} MiB")
    ref_text: str | None = Field(default=None, description="transcript of the reference (in-context cloning)")
    mode: str | None = Field(default=None, description="x_vector or in_context (default: in_context with ref_text)")

    def speech_request(self) -> SpeechRequest:
        return SpeechRequest(voice="clone", **self.model_dump(include=set(SpeechOptions.model_fields)))


class VoiceUploadForm(BaseModel):
    """POST /v1/audio/voices (multipart), shaped like OpenAI's, plus `ref_text` and `mode`."""

    name: str = Field(min_length=1, max_length=256)
    type: Literal["audio_sample", "prompt"] = "audio_sample"
    audio_sample: UploadFile | None = Field(default=None, description="recording to clone (type audio_sample)")
    consent: str | None = None
    prompt: str | None = Field(default=None, max_length=4096, description="voice description (type prompt)")
    ref_text: str | None = Field(default=None, description="transcript of the audio sample (in-context cloning)")
    mode: str | None = Field(default=None, description="x_vector or in_context (default: in_context with ref_text)")
