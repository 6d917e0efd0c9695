"""Which hosted Qwen3-ASR model serves a transcription request, from the request's `model`."""

from __future__ import annotations

from ...engine.registry import HostedModel, ModelRegistry
from ...errors import NotFoundError


def route_recognizer(registry: ModelRegistry, model: str | None) -> HostedModel:
    """The hosted transcriber a transcription request goes to: the one its `model` names (by id, any case);
    `gpt-4o-mini-transcribe` the smallest, `whisper-1`, `gpt-4o-transcribe` and `gpt-transcribe` the largest; any
    other name the first (clients hard-code model names: a name is never an error)."""
    if not registry.recognizers:
        raise NotFoundError(
            "no speech recognition model is hosted: add a Qwen3-ASR checkpoint (Qwen/Qwen3-ASR-0.6B) to MODELS",
            param="model",
        )
    wanted = (model or "").strip().lower()
    named = next((hosted for hosted in registry.recognizers if hosted.id.lower() == wanted), None)
    if named is not None:
        return named
    by_size = sorted(registry.recognizers, key=lambda hosted: hosted.footprint.own if hosted.footprint else 0)
    if wanted == "gpt-4o-mini-transcribe":
        return by_size[0]
    if wanted in ("whisper-1", "gpt-4o-transcribe", "gpt-transcribe"):
        return by_size[-1]
    return registry.recognizers[0]
