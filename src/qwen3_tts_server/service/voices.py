"""Voices: resolution of the name a request gives (preset speakers, OpenAI's voice names, library voices,
inline clones) into a checked voice, and the voice library's operations (list, create, get, delete)."""

from __future__ import annotations

import asyncio

from ..engine.model_manager import ModelManager
from ..errors import InvalidInputError
from ..model.prompt import VoiceSpec
from ..model.tts_model import Qwen3TTSModel
from ..model.voice_prompt import VoicePrompt
from .cloning import VoiceCloner
from .voice_library import StoredVoice, VoiceLibrary

# OpenAI's built-in voice names, each mapped to a preset speaker of the CustomVoice models.
OPENAI_VOICES = {
    "alloy": "vivian",
    "ash": "ryan",
    "ballad": "aiden",
    "coral": "serena",
    "echo": "ryan",
    "fable": "aiden",
    "onyx": "uncle_fu",
    "nova": "serena",
    "sage": "ono_anna",
    "shimmer": "sohee",
    "verse": "aiden",
    "marin": "vivian",
    "cedar": "uncle_fu",
}


def preset_voices(speakers: list[str]) -> dict[str, str]:
    """Every voice name a model with these preset speakers answers to (presets and OpenAI aliases) -> its
    preset speaker."""
    voices = {name: name for name in speakers}
    voices.update({alias: target for alias, target in OPENAI_VOICES.items() if target in voices})
    return voices


def resolve_voice(
    model: Qwen3TTSModel,
    library: VoiceLibrary,
    name: str,
    instructions: str | None,
    clone: VoicePrompt | None = None,
) -> VoiceSpec:
    """The voice `name` stands for (a preset, an OpenAI alias, a library voice; `clone`: an inline cloned
    voice), checked against the model."""
    check = model.prompts.check_voice
    if clone is not None:
        return check(instruct=instructions, voice=clone)
    stored = library.find(name)
    if stored is not None and stored.type == "audio_sample":
        return check(instruct=instructions, voice=library.clone_prompt(stored))
    if stored is not None and model.model_type != "voice_design":
        raise InvalidInputError(
            f"voice {stored.id} is a designed voice (a description); a VoiceDesign model speaks it, "
            f"this server runs a {model.model_type} model",
            param="voice",
        )
    if model.model_type == "custom_voice":
        voices = preset_voices(model.speakers)
        speaker = voices.get(name.lower())
        if speaker is None:  # 400, as OpenAI and the earlier server answer an unknown voice
            raise InvalidInputError(f"unknown voice {name!r}; available: {', '.join(sorted(voices))}", param="voice")
        return check(speaker=speaker, instruct=instructions)
    if model.model_type == "voice_design":
        description = " ".join(filter(None, [stored.prompt if stored else None, instructions]))
        if not description.strip():
            raise InvalidInputError(
                "a VoiceDesign model needs `instructions` describing the voice, or a voice created from a "
                "description (POST /v1/audio/voices with type=prompt)",
                "instructions",
            )
        return check(instruct=description)
    cloned = [voice.id for voice in library.list() if voice.type == "audio_sample"]
    raise InvalidInputError(
        f"unknown voice {name!r}: a Base model speaks cloned voices; upload one with "
        f"POST /v1/audio/voices or use POST /v1/audio/speech/clone"
        + (f"; library voices: {', '.join(cloned)}" if cloned else ""),
        param="voice",
    )


class VoiceService:
    """The voice library as the API offers it; file work and cloning run off the event loop."""

    def __init__(self, models: ModelManager, library: VoiceLibrary, cloner: VoiceCloner):
        self.models = models
        self.library = library
        self.cloner = cloner

    async def list_voices(self) -> list[dict]:
        """Presets, aliases and library voices, from the checkpoint's config: the model is not loaded for it."""
        speakers = (await asyncio.to_thread(self.models.config)).speakers
        voices = [{"id": name, "name": name, "type": "preset"} for name in speakers]
        voices += [
            {"id": alias, "name": alias, "type": "alias", "alias_of": target}
            for alias, target in sorted(preset_voices(speakers).items())
            if alias in OPENAI_VOICES
        ]
        return voices + [voice.public() for voice in self.library.list()]

    async def create_from_description(self, name: str, description: str | None, consent: str | None) -> StoredVoice:
        if not (description or "").strip():
            raise InvalidInputError("a voice of type prompt needs `prompt`, a description of the voice", "prompt")
        return await asyncio.to_thread(self.library.add, name, description=description.strip(), consent=consent)

    async def create_from_sample(
        self, name: str, audio: bytes, ref_text: str | None, mode: str | None, consent: str | None
    ) -> StoredVoice:
        prompt = await self.clone_prompt(audio, ref_text, mode, field="audio_sample")
        return await asyncio.to_thread(self.library.add, name, prompt, consent=consent)

    async def clone_prompt(self, audio: bytes, ref_text: str | None, mode: str | None, field: str) -> VoicePrompt:
        model = await self.models.get_async()
        return await self.cloner.prompt(model, audio, ref_text, mode, field=field)

    def get(self, voice_id: str) -> StoredVoice:
        return self.library.get(voice_id)

    async def delete(self, voice_id: str) -> StoredVoice:
        return await asyncio.to_thread(self.library.delete, voice_id)
