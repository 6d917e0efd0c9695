"""Voices: resolution of the name a request gives (preset speakers, OpenAI's voice names, library voices,
inline clones) into a checked voice, and the voice library's operations (list, create, get, delete)."""

from __future__ import annotations

import asyncio
import contextlib

from ...engine.registry import HostedModel, ModelRegistry
from ...errors import InvalidInputError, TTSError, UnknownVoiceError, shown
from ...model.tts.prompt import VoiceSpec
from ...model.tts.tts_model import Qwen3TTSModel
from ...model.tts.voice_prompt import VoicePrompt
from .cloning import VoiceCloner
from .routing import VoiceNeed, route, voice_need
from .voice_library import StoredVoice, VoiceLibrary, voice_key
from .voice_names import OPENAI_VOICES, RESERVED_NAMES, accepted_names, preset_voices


def resolve_voice(
    model: Qwen3TTSModel,
    library: VoiceLibrary,
    name: str,
    instructions: str | None,
    clone: VoicePrompt | None = None,
) -> VoiceSpec:
    """The voice `name` stands for, checked against the model: a preset speaker or an OpenAI name (CustomVoice), a
    library voice by id or by name (matched as the earlier server matched names: `voice_key`), an OpenAI name for
    the preset voice made for a Base model, or `clone`, an inline cloned voice."""
    check = model.prompts.check_voice
    if clone is not None:
        return check(instruct=instructions, voice=clone)
    key = voice_key(name)
    if model.model_type == "custom_voice":
        speaker = preset_voices(model.speakers).get(key)
        if speaker is not None:
            return check(speaker=speaker, instruct=instructions)
    stored = library.find(name)
    if stored is None and model.model_type == "base" and key in OPENAI_VOICES:
        stored = library.named(OPENAI_VOICES[key])  # the preset speaker's voice made for the Base model
    if stored is not None and stored.type == "audio_sample":
        return check(instruct=instructions, voice=library.clone_prompt(stored))
    if stored is not None and model.model_type != "voice_design":
        raise InvalidInputError(
            f"voice {stored.id} is a designed voice (a description); a VoiceDesign model speaks it, "
            f"this server runs a {model.model_type} model",
            param="voice",
        )
    if model.model_type == "voice_design":
        description = " ".join(filter(None, [stored.prompt if stored else None, instructions]))
        if not description.strip():
            raise InvalidInputError(
                "a VoiceDesign model needs `instructions` describing the voice, or a voice created from a "
                "description (POST /v1/audio/voices with type=prompt)",
                "instructions",
            )
        return check(instruct=description)
    valid = sorted(accepted_names(model.speakers, library))
    if model.model_type == "custom_voice":  # 400, as OpenAI and the earlier server answer an unknown voice
        raise UnknownVoiceError(f"unknown voice {shown(name)}; available: {', '.join(valid)}", name, valid)
    raise UnknownVoiceError(
        f"unknown voice {shown(name)}: a Base model speaks cloned voices; upload one with POST /v1/audio/voices, use "
        "POST /v1/audio/speech/clone, or make the preset voices with `qwen3-tts-server make-preset-voices`"
        + (f"; library voices: {', '.join(valid)}" if valid else ""),
        name,
        valid,
    )


def check_name(name: str) -> None:
    """A name a caller may give a library voice: not one of the preset voices' (RESERVED_NAMES)."""
    if voice_key(name) in RESERVED_NAMES:
        raise InvalidInputError(
            f"the name {name!r} is reserved for a preset voice (`qwen3-tts-server make-preset-voices` makes them for "
            "a Base model); choose another",
            param="name",
        )


class VoiceService:
    """The voice library as the API offers it; file work and cloning run off the event loop."""

    def __init__(
        self, registry: ModelRegistry, library: VoiceLibrary, cloner: VoiceCloner, default_voice: str = "vivian"
    ):
        self.registry = registry
        self.library = library
        self.cloner = cloner
        self.default_voice = default_voice  # what a request that names no voice speaks in (DEFAULT_VOICE)

    async def accepted_names(self) -> list[str]:
        """Every voice name a request may give (`accepted_names`), as the earlier server's /health listed them. The
        model is not loaded for it."""
        return accepted_names(await self._speakers(), self.library)

    async def _speakers(self) -> list[str]:
        """The preset speakers of every hosted model, from their configs (the models are not loaded for it)."""
        for hosted in self.registry:
            if hosted.config is None:  # /health asks this on every probe: no thread hop once configs are read
                with contextlib.suppress(TTSError):  # unreadable: /health says so, the other names still count
                    await asyncio.to_thread(hosted.manager.config)
        return self.registry.speakers()

    async def list_voices(self) -> list[dict]:
        """Presets, aliases and library voices, from the checkpoints' configs: no model is loaded for it. With
        several hosted models, each voice says which speak it (`models`)."""
        if len(self.registry) == 1:  # its config's errors answered as they always were
            await asyncio.to_thread(self.registry.default.manager.config)
        speakers = await self._speakers()
        voices = [{"id": name, "name": name, "type": "preset"} for name in speakers]
        voices += [
            {"id": alias, "name": alias, "type": "alias", "alias_of": target}
            for alias, target in sorted(preset_voices(speakers).items())
            if alias in OPENAI_VOICES
        ]
        voices += [voice.public() for voice in self.library.list()]
        if len(self.registry) > 1:
            await asyncio.to_thread(self._name_models, voices)
        return voices

    def _name_models(self, voices: list[dict]) -> None:
        for voice in voices:
            need = voice_need(self.registry, self.library, voice["id"], voice.get("prompt"), False)
            if voice["type"] == "alias":
                need = VoiceNeed("preset", speaker=voice["id"])
            voice["models"] = [hosted.id for hosted in self.registry if need.spoken_by(hosted)]

    async def create_from_description(self, name: str, description: str | None, consent: str | None) -> StoredVoice:
        check_name(name)
        if not (description or "").strip():
            raise InvalidInputError("a voice of type prompt needs `prompt`, a description of the voice", "prompt")
        return await asyncio.to_thread(self.library.add, name, description=description.strip(), consent=consent)

    async def create_from_sample(
        self,
        name: str,
        audio: bytes,
        ref_text: str | None,
        mode: str | None,
        consent: str | None,
        model: str | None = None,
    ) -> StoredVoice:
        """A library voice cloned from `audio` by the Base model that `model` names as a speech request would name
        it (routing's rules for an inline clone: the first hosted Base model when it names none)."""
        check_name(name)
        hosted = route(self.registry, None, model, name, inline_clone=True)
        prompt = await self.clone_prompt(audio, ref_text, mode, field="audio_sample", hosted=hosted)
        return await asyncio.to_thread(self.library.add, name, prompt, consent=consent)

    async def clone_prompt(
        self, audio: bytes, ref_text: str | None, mode: str | None, field: str, hosted: HostedModel
    ) -> VoicePrompt:
        """A clone prompt of `audio` made by `hosted` (a model that cannot clone says so)."""
        model = await hosted.manager.get_async()
        return await self.cloner.prompt(model, audio, ref_text, mode, field=field)

    def get(self, voice_id: str) -> StoredVoice:
        return self.library.get(voice_id)

    async def delete(self, voice_id: str) -> StoredVoice:
        return await asyncio.to_thread(self.library.delete, voice_id)
