"""Request bodies of the speech routes, OpenAI's and the earlier server's (unknown extra fields are accepted:
clients send extensions through `extra_body`)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Literal

from fastapi import UploadFile
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ...errors import InvalidValueError
from ...service.speech.requests import SamplingOverrides, SynthesisRequest
from ..schemas import MAX_UPLOAD_BYTES

log = logging.getLogger(__name__)

# `ogg` is the earlier server's name for Ogg Opus (the same bytes as `opus`).
ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw", "ogg"]


class VoiceId(BaseModel):
    id: str


class SpeechOptions(BaseModel):
    """Everything about a speech request but the voice.

    Two forms share it. OpenAI's (with `model`): mp3 by default. The earlier server's (no `model`, which it never
    read): WAV by default. Either way a WAV is one whole file with exact sizes unless `stream` is true (what every
    WAV reader reads); the other formats stream unless `stream` is false."""

    model: str | None = None
    input: str = Field(max_length=4096)
    instructions: str | None = Field(
        default=None,
        max_length=4096,
        validation_alias=AliasChoices("instructions", "instruct"),  # `instruct`: the earlier server's name
    )
    response_format: ResponseFormat | None = Field(
        default=None, description="default: mp3 with `model`, wav without it (the earlier server's form)"
    )
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    # The earlier server's: audio in chunks of frames (token) or one chunk per sentence; default: STREAM_TYPE.
    stream_mode: Literal["token", "sentence"] | None = None
    # Extensions.
    stream: bool | None = Field(
        default=None,
        description="false: the whole file at once, with Content-Length and latency headers; default: true, "
        "but false for wav",
    )
    language: str | None = None
    # At most 100: far beyond any useful value; a float32 overflow (inf) would turn the suppressed codes into NaN.
    temperature: float | None = Field(
        default=None, gt=0, le=100, description="sampling temperature (default: checkpoint's)"
    )
    top_p: float | None = Field(default=None, gt=0, le=1, description="nucleus sampling mass")
    # Past the codebooks' size (2,048 and 3,072 codes) a larger k keeps every candidate alike; the bound keeps k
    # inside the 64-bit integers the sampler takes.
    top_k: int | None = Field(default=None, ge=0, le=2**31 - 1, description="candidates kept; 0 disables top-k")
    repetition_penalty: float | None = Field(default=None, gt=0, le=100)
    # 63-bit: the engine keeps seeds as int64, each segment's the request's plus its index.
    seed: int | None = Field(default=None, ge=-(2**62), le=2**62, description="reproducible sampling")
    sample_rate: int | None = Field(default=None, ge=8000, le=48000, description="output rate (default: format's)")
    normalize: bool | None = None  # numbers, dates, symbols... in words; None: the server's TEXT_NORMALIZE
    include_text: bool = False  # report the spoken (normalised) text: X-Spoken-Text, or a speech.text SSE event
    timestamps: bool = Field(
        default=False,
        description="with stream_format sse: a speech.words event per segment, its words timed by the hosted "
        "ForcedAligner",
    )

    @field_validator("input", mode="before")
    @classmethod
    def _input_is_unicode(cls, value: object) -> object:
        """A lone surrogate (JSON can escape one, "\\ud800") is not Unicode text: refused, saying where it is."""
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise PydanticCustomError(
                    "lone_surrogate",
                    "holds a lone surrogate (U+{code} at character {index}), which is not Unicode text: "
                    "send the character itself, or both halves of its surrogate pair",
                    {"code": f"{ord(value[exc.start]):04X}", "index": exc.start},
                ) from None
        return value

    @model_validator(mode="after")
    def _defaults(self) -> SpeechOptions:
        if self.response_format is None:
            self.response_format = self.default_format()
        if self.stream is None:
            self.stream = self.response_format != "wav"
        return self

    def default_format(self) -> ResponseFormat:
        return "mp3" if self.model is not None else "wav"

    @property
    def format_name(self) -> ResponseFormat:
        """The response format, the form's default filled in."""
        return self.response_format or self.default_format()

    def to_synthesis(self, voice: str | None) -> SynthesisRequest:
        """The service's request: the validated values, free of this schema."""
        return SynthesisRequest(
            text=self.input,
            voice=voice,
            model=self.model,
            language=self.language,
            instructions=self.instructions,
            response_format=self.format_name,
            sample_rate=self.sample_rate,
            speed=self.speed,
            sampling=SamplingOverrides(
                temperature=self.temperature,
                top_k=self.top_k,
                top_p=self.top_p,
                repetition_penalty=self.repetition_penalty,
                seed=self.seed,
            ),
            normalize=self.normalize,
            interactive=bool(self.stream) or self.stream_format == "sse",
            stream_mode=self.stream_mode,
            timestamps=self.timestamps,
        )


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

    voice: str | VoiceId | None = None  # None or empty: the server's DEFAULT_VOICE

    @property
    def voice_name(self) -> str | None:
        name = self.voice.id if isinstance(self.voice, VoiceId) else self.voice
        return name or None

    @model_validator(mode="after")
    def _log_unknown_fields(self) -> SpeechRequest:
        for name in self.model_extra or {}:
            _log_unknown_field(name)
        return self

    def synthesis(self) -> SynthesisRequest:
        return self.to_synthesis(self.voice_name)


class CaptionedSpeechRequest(SpeechRequest):
    """Kokoro-FastAPI's captioned speech: audio with its words' times, as JSON (one object, or with `stream` a JSON
    line per piece of audio). mp3 and streamed by default, as Kokoro's are."""

    stream: bool | None = True
    return_timestamps: bool = True
    # An extension: the words as subtitles too (whole answers only), in `subtitles`.
    subtitles: Literal["srt", "vtt"] | None = None

    def default_format(self) -> ResponseFormat:
        return "mp3"

    def synthesis(self) -> SynthesisRequest:
        return replace(super().synthesis(), timestamps=self.return_timestamps)


class CloneSpeechForm(SpeechOptions):
    """POST /v1/audio/speech/clone (multipart): speech in a voice cloned from inline reference audio, WAV by default
    (as the earlier server answered this route). The recording comes as `ref_audio` or as `file`, the earlier
    server's field."""

    ref_audio: UploadFile | None = Field(
        default=None, description=f"reference recording, at most {MAX_UPLOAD_BYTES >> 20} MiB (or as `file`)"
    )
    file: UploadFile | None = Field(default=None, description="the reference recording (the earlier server's field)")
    ref_text: str | None = Field(default=None, description="transcript of the reference (in-context cloning)")
    mode: str | None = Field(default=None, description="x_vector or in_context (default: in_context with ref_text)")

    def default_format(self) -> ResponseFormat:
        return "wav"

    def recording(self) -> tuple[UploadFile, str]:
        """The reference upload and the field it came in: exactly one of the two."""
        if self.ref_audio is not None and self.file is not None:
            raise InvalidValueError("send the reference recording once, as ref_audio or as file", param="file")
        if self.ref_audio is not None:
            return self.ref_audio, "ref_audio"
        if self.file is not None:
            return self.file, "file"
        raise InvalidValueError(
            "ref_audio: Field required (the reference recording; `file` is accepted too)", "ref_audio"
        )

    def synthesis(self) -> SynthesisRequest:
        return self.to_synthesis("clone")


class VoiceUploadForm(BaseModel):
    """POST /v1/audio/voices (multipart), shaped like OpenAI's, plus `ref_text` and `mode`."""

    name: str = Field(min_length=1, max_length=256)
    type: Literal["audio_sample", "prompt"] = "audio_sample"
    audio_sample: UploadFile | None = Field(default=None, description="recording to clone (type audio_sample)")
    consent: str | None = None
    prompt: str | None = Field(default=None, max_length=4096, description="voice description (type prompt)")
    ref_text: str | None = Field(default=None, description="transcript of the audio sample (in-context cloning)")
    mode: str | None = Field(default=None, description="x_vector or in_context (default: in_context with ref_text)")
    model: str | None = Field(
        default=None,
        description="the Base model that clones the sample, named as in a speech request (default: the first "
        "hosted Base model); the voice is then spoken by that model",
    )


_unknown_fields_seen: set[str] = set()
MAX_UNKNOWN_FIELDS_REMEMBERED = 1024  # names are the caller's: a bounded memory of them


def _log_unknown_field(name: str) -> None:
    """Unknown fields are accepted (clients send extensions this server may not have) and logged once."""
    if name in _unknown_fields_seen or len(_unknown_fields_seen) >= MAX_UNKNOWN_FIELDS_REMEMBERED:
        return
    _unknown_fields_seen.add(name)
    log.debug("ignoring the unknown request field %r", name)
