"""A speech request as the service takes it: validated values, free of any API's schema (the API's request
objects convert themselves into these)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import InvalidInputError, shown
from ...model.tts.sampling import SamplingParams
from ...model.tts.tts_model import Qwen3TTSModel
from ...text.language import LANGUAGE_NAMES


@dataclass(frozen=True)
class SamplingOverrides:
    """Sampling settings a caller may set; None keeps the checkpoint's default."""

    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None

    def params(self, model: Qwen3TTSModel) -> SamplingParams:
        return model.sampling(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            repetition_penalty=self.repetition_penalty,
            seed=self.seed,
        )


@dataclass(frozen=True)
class SynthesisRequest:
    text: str
    voice: str | None  # a preset, an OpenAI voice name or a library voice (id or name); None: the default voice
    model: str | None = None  # a hosted model's id or short name, an OpenAI model name, or anything else (unspecified)
    language: str | None = None  # None: detected
    instructions: str | None = None
    response_format: str = "mp3"
    sample_rate: int | None = None  # None: the format's default
    speed: float = 1.0
    sampling: SamplingOverrides = field(default_factory=SamplingOverrides)
    normalize: bool | None = None  # None: the server's default
    interactive: bool = True  # streamed: admitted before whole-file requests
    stream_mode: str | None = None  # "token" (chunks of frames) or "sentence" (a chunk per segment); None: STREAM_TYPE
    timestamps: bool = False  # each segment's words timed by the hosted ForcedAligner once its audio is made


def language_of_code(code: str, param: str) -> str:
    """The model's name for the language of an ISO 639-1 code or a BCP 47 tag (`es`, `es-MX`), as the protocols of
    other vendors give it; one the model does not speak is refused, naming `param`."""
    language = LANGUAGE_NAMES.get(code.split("-")[0].lower())
    if language is None:
        raise InvalidInputError(f"{param} {shown(code)} is not spoken; one of {', '.join(LANGUAGE_NAMES)}", param)
    return language
