"""Which hosted model serves a speech request: decided here and only here, from the request's `model` and its
voice (docs/models.md has the table).

- `model` naming a hosted model (its id, the last part of a hub id, or a short name such as
  `qwen3-tts-0.6b-base`) picks it; the model then answers for its voice as it always did.
- `tts-1` is the smallest hosted model that can speak the voice, `tts-1-hd` the largest, `gpt-4o-mini-tts` one
  that follows `instructions` (a 1.7B CustomVoice, or VoiceDesign), the largest such.
- Any other `model`, or none, leaves the choice to the voice: the first hosted model (in MODELS' order) that can
  speak it. A preset speaker or OpenAI voice name needs a CustomVoice model with that speaker (or, failing one,
  the Base model its preset voice was made for by make-preset-voices), a library voice cloned from audio the Base
  model it was made with, a designed voice or a description in `instructions` a VoiceDesign model, an inline
  clone a Base model.
- A voice no hosted model can speak is a 400 naming what is hosted; where every hosted model is of one type,
  that model's own answer (an unknown voice lists the valid ones, as the earlier server's did).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...engine.registry import HostedModel, ModelRegistry
from ...errors import InvalidInputError, NotFoundError, UnknownVoiceError, shown
from .voice_library import VoiceLibrary, voice_key
from .voice_names import OPENAI_VOICES, accepted_names, preset_voices

OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
TYPE_NAMES = {"custom_voice": "customvoice", "base": "base", "voice_design": "voicedesign"}
SIZE_NAMES = {"0b6": "0.6b", "1b7": "1.7b"}
SPEAKS = {
    "preset": "preset speakers and OpenAI voice names",
    "clone": "voices cloned from audio",
    "design": "voices described in words",
}


def short_name(hosted: HostedModel) -> str | None:
    """`qwen3-tts-<size>-<type>`, e.g. qwen3-tts-0.6b-base; None before the config is read."""
    config = hosted.config
    if config is None:
        return None
    size = SIZE_NAMES.get(config.model_size, config.model_size or "unknown")
    return f"qwen3-tts-{size}-{TYPE_NAMES.get(config.model_type, config.model_type)}"


def names(hosted: HostedModel) -> set[str]:
    """Every name a request's `model` may give this hosted model, lower-cased."""
    found = {hosted.id.lower(), hosted.id.rsplit("/", 1)[-1].lower()}
    short = short_name(hosted)
    return found | {short} if short else found


@dataclass(frozen=True)
class VoiceNeed:
    """What a voice asks of a model: `kind` is preset, clone (a library voice or an inline one) or design."""

    kind: str
    speaker: str | None = None  # preset: the speaker's key
    checkpoint: str | None = None  # clone from the library: the fingerprint of the Base model that made it

    def spoken_by(self, hosted: HostedModel) -> bool:
        config = hosted.config
        if config is None:
            return False
        if self.kind == "preset":
            return config.model_type == "custom_voice" and self.speaker in preset_voices(config.speakers)
        if self.kind == "clone":
            return config.model_type == "base" and self.checkpoint in (None, hosted.fingerprint)
        return config.model_type == "voice_design"


def voice_need(
    registry: ModelRegistry, library: VoiceLibrary | None, voice: str, instructions: str | None, inline_clone: bool
) -> VoiceNeed:
    """In the order a model resolves a voice: an inline clone, a hosted preset speaker or OpenAI name, a library
    voice (by id or name; an OpenAI name as the preset voice made for a Base model; none without a library), a
    description."""
    if inline_clone:
        return VoiceNeed("clone")
    key = voice_key(voice)
    preset = VoiceNeed("preset", speaker=key)
    if any(preset.spoken_by(hosted) for hosted in registry):
        return preset
    stored = library.find(voice) if library is not None else None
    if stored is None and library is not None and key in OPENAI_VOICES:
        stored = library.named(OPENAI_VOICES[key])
    if library is not None and stored is not None and stored.type == "audio_sample":
        try:
            return VoiceNeed("clone", checkpoint=library.clone_prompt(stored).checkpoint)
        except NotFoundError:  # deleted meanwhile: the model's own lookup says so
            return VoiceNeed("clone")
    if stored is not None or (instructions and instructions.strip()):
        return VoiceNeed("design")
    return preset


def route(
    registry: ModelRegistry,
    library: VoiceLibrary | None,
    model: str | None,
    voice: str,
    instructions: str | None = None,
    inline_clone: bool = False,
) -> HostedModel:
    if len(registry) <= 1:
        return registry.default  # none: its 404
    wanted = (model or "").strip().lower()
    named = next((hosted for hosted in registry if wanted in names(hosted)), None)
    if named is not None:
        return named
    need = voice_need(registry, library, voice, instructions, inline_clone)
    candidates = [hosted for hosted in registry if need.spoken_by(hosted)]
    if not candidates:
        types = {hosted.config.model_type if hosted.config else None for hosted in registry}
        if len(types) == 1:
            return registry.default  # its own answer: the voices it accepts
        listing = describe_hosted(registry)
        message = f"no hosted model speaks voice {shown(voice)} ({SPEAKS[need.kind]}); hosted: {listing}"
        if need.kind == "preset":
            speakers = registry.speakers()
            valid = accepted_names(speakers, library) if library is not None else list(preset_voices(speakers))
            raise UnknownVoiceError(message, voice, sorted(set(valid)))
        raise InvalidInputError(message, param="voice")
    by_size = sorted(candidates, key=lambda hosted: hosted.footprint.own if hosted.footprint else 0)
    if wanted == "tts-1":
        return by_size[0]
    if wanted == "tts-1-hd":
        return by_size[-1]
    if wanted == "gpt-4o-mini-tts":
        instructed = [hosted for hosted in by_size if hosted.config.accepts_instruct]
        return (instructed or by_size)[-1]
    return candidates[0]


def describe_hosted(registry: ModelRegistry) -> str:
    """Each hosted model with what it speaks, for error messages."""
    speaks = {"custom_voice": "preset", "base": "clone", "voice_design": "design"}
    parts = []
    for hosted in registry:
        kind = speaks.get(hosted.config.model_type) if hosted.config else None
        parts.append(f"{hosted.id} ({SPEAKS[kind] if kind else 'config unreadable'})")
    return "; ".join(parts)
