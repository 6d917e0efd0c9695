"""Typed errors shared by every layer. The API layer maps them to HTTP statuses; the CLI prints them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from .http_contract import error_document, error_object

ECHO_LIMIT = 100  # characters of a client's value an error message repeats


def shown(value: object, limit: int = ECHO_LIMIT) -> str:
    """A client's value as an error message repeats it: its repr, cut to `limit` characters (a megabyte sent in a
    field is not sent back)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class TTSError(Exception):
    """Base class: a message meant for the user, never a traceback. `flat_code` is the name the earlier server's
    clients read in the body's flat `code` (None: `code` in capitals); `context`, what it adds for them."""

    status = 500
    code = "internal_error"
    flat_code: str | None = None

    def __init__(self, message: str, param: str | None = None, context: dict | None = None):
        super().__init__(message)
        self.param = param  # the request field or setting it is about
        self.context = context


class InvalidInputError(TTSError):
    """The request itself is wrong (unknown speaker, empty text, ...)."""

    status = 400
    code = "invalid_request"


class EmptyInputError(InvalidInputError):
    """No text was given to speak."""

    flat_code = "EMPTY_INPUT"


class NoSentencesError(InvalidInputError):
    """The text holds nothing a voice can say (punctuation, symbols with no spoken form)."""

    flat_code = "NO_SENTENCES"


class UnknownVoiceError(InvalidInputError):
    """A voice name the server does not know; the valid names go with it (message and context)."""

    flat_code = "UNKNOWN_VOICE"

    def __init__(self, message: str, voice: str, valid: list[str]):
        echoed = voice if len(voice) <= ECHO_LIMIT else shown(voice)  # a megabyte sent is not sent back
        super().__init__(message, param="voice", context={"voice": echoed, "valid_voices": valid})


class InvalidValueError(InvalidInputError):
    """A field failed schema validation (type, range, length, missing)."""

    code = "invalid_value"


class UnprocessableValueError(InvalidValueError):
    """A field failed schema validation on a route of the earlier ASR server's own, which answered it 422 (FastAPI's
    status) where OpenAI's routes answer 400."""

    status = 422


class AudioTooLongError(InvalidInputError):
    """Audio lasts longer than its limit (found while decoding it: the rest is never decoded)."""

    code = "audio_too_long"


class NotFoundError(InvalidInputError):
    """A named thing (a voice, ...) does not exist."""

    status = 404
    code = "not_found"


class ConflictError(InvalidInputError):
    """The request would take what something else holds (a voice name in use)."""

    status = 409
    code = "conflict"


class PayloadTooLargeError(InvalidInputError):
    """An upload is over its size limit."""

    status = 413
    code = "payload_too_large"


class BodyTimeoutError(InvalidInputError):
    """The client took longer than its time limit to send the request's body."""

    status = 408
    code = "request_timeout"


class HeadersTooLargeError(InvalidInputError):
    """The request's headers are too many or too large."""

    status = 431
    code = "request_header_fields_too_large"


class PendingTextLimitError(InvalidInputError):
    """Text arrives faster than it is spoken: the session holds MAX_PENDING_TEXT characters not yet spoken."""

    status = 429
    code = "pending_text_limit"


class PendingAudioLimitError(InvalidInputError):
    """Audio arrives faster than a live session transcribes it: more than its bound waits for its passes."""

    status = 429
    code = "pending_audio_limit"


class EmptyCommitError(InvalidInputError):
    """A realtime session's commit found (almost) no audio since the last item: OpenAI's error for it."""

    code = "input_audio_buffer_commit_empty"


class UnsupportedMediaError(InvalidInputError):
    """Uploaded bytes are not audio in a format this server can decode: a 400, as OpenAI answers an unsupported file
    (the earlier TTS server answered 400, the earlier ASR server 422)."""

    code = "unsupported_media_type"
    flat_code = "INVALID_AUDIO"


class InsufficientStorageError(TTSError):
    """The server's disk is full or read-only: nothing was written (a 507)."""

    status = 507
    code = "insufficient_storage"


class ConfigurationError(TTSError):
    """A server setting is wrong (device, dtype, ...): the operator's to fix, not the caller's."""

    code = "configuration_error"


class CheckpointError(TTSError):
    """A checkpoint cannot be found, fetched or read."""

    code = "checkpoint_error"


class UnsupportedModelError(CheckpointError):
    """The checkpoint is readable but is not a model this server can run."""

    code = "unsupported_model"


class ModelUnavailableError(CheckpointError):
    """The model cannot be loaded now: its checkpoint is missing or unreadable, or a load failed moments ago. A 503,
    not a 500: nothing is wrong with the request, and the server serves again once its checkpoint is fixed."""

    status = 503
    code = "model_unavailable"


class ModelWaitError(ModelUnavailableError):
    """A model could not be loaded in time because the memory budget holds other models that are busy: 503 with
    Retry-After: `retry_after`."""

    code = "model_busy"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class EngineBusyError(TTSError):
    """The wait queue is full; the API answers 503 with Retry-After: `retry_after`, whole seconds until the
    queue has likely drained."""

    status = 503
    code = "server_busy"
    flat_code = "QUEUE_FULL"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class IdleTimeoutError(InvalidInputError):
    """A live session went LIVE_IDLE_TIMEOUT seconds without a message either way (Wyoming: without audio before
    its audio-stop): it ends, its slot given back."""

    status = 408
    code = "idle_timeout"


class LiveSessionLimitError(TTSError):
    """A transcriber already serves its LIVE_MAX_SESSIONS live sessions: a new one is refused until one ends (503:
    the sessions it serves stay at real time rather than every one falling behind)."""

    status = 503
    code = "live_session_limit"


class EngineOutOfMemoryError(TTSError):
    """The GPU had no memory left for a request's work. A 503, not a 500: nothing is wrong with the request or the
    server, memory frees as other streams end, so a retry later (or on another replica) can succeed."""

    status = 503
    code = "out_of_memory"


class RequestTimeoutError(TTSError):
    """A request ran past its time limit and was stopped."""

    status = 504
    code = "timeout"
    flat_code = "SYNTHESIS_TIMEOUT"


class TranscriptionTimeoutError(RequestTimeoutError):
    """A transcription ran past its time limit and was stopped."""

    flat_code = "TRANSCRIPTION_TIMEOUT"


class SynthesisFailedError(TTSError):
    """The engine failed on a request's work for a reason of its own (logged; never told in its own words)."""

    flat_code = "SYNTHESIS_FAILED"


class TranscriptionFailedError(TTSError):
    """The recognition engine failed on a request's work for a reason of its own (logged; never told in its own
    words)."""

    flat_code = "TRANSCRIPTION_FAILED"


class AlignmentFailedError(TTSError):
    """The aligner failed on a spoken segment for a reason of its own (logged; never told in its own words)."""

    code = "alignment_failed"


class EngineStoppedError(TTSError):
    """The engine was shut down before the request finished."""

    status = 503
    code = "engine_stopped"


def invalid_value(errors: Sequence[Mapping], kind: type[InvalidValueError] = InvalidValueError) -> InvalidValueError:
    """The first of pydantic's validation errors, naming its field (FastAPI's `body` prefix dropped)."""
    first = errors[0]
    param = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or None
    return kind(f"{param or 'request'}: {first.get('msg', 'invalid value')}", param)


Fields = TypeVar("Fields", bound=BaseModel)


def checked(model: type[Fields], value: object, where: str = "") -> Fields:
    """A message's object `value` (at `where`, e.g. `session.turn_detection`) validated as `model`; else an
    InvalidValueError naming its first bad field and, shortened, the value given."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join([*filter(None, [where]), *(str(part) for part in first["loc"])])
        message = f"{param or 'message'}: {first['msg']}, not {shown(first['input'])}"
        raise InvalidValueError(message, param or None) from None


def error_body(exc: TTSError) -> dict:
    """OpenAI's error object for `exc` (in events: SSE, WebSocket, Wyoming)."""
    return error_object(exc.status, str(exc), exc.code, exc.param)


def error_response_body(exc: TTSError) -> dict:
    """The HTTP body for `exc`: OpenAI's envelope with the earlier server's flat keys (`error_document`)."""
    return error_document(exc.status, str(exc), exc.code, exc.param, exc.flat_code, exc.context)


class NotImplementedFeatureError(TTSError):
    """A route this server answers only once configured (translations without a translation model)."""

    status = 501
    code = "not_implemented"


class UpstreamError(TTSError):
    """A service this server calls on a request's behalf (the translation model) failed or answered nonsense."""

    status = 502
    code = "upstream_error"
    flat_code = "TRANSLATION_FAILED"
