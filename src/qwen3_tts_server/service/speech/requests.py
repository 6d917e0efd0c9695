"""A speech request as the service takes it: validated values, free of any API's schema (the API's request
objects convert themselves into these)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.tts.sampling import SamplingParams
from ...model.tts.tts_model import Qwen3TTSModel


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
