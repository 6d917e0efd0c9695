"""Voice resolution: preset speakers, OpenAI's voice names, library voices (cloned or designed), inline clones."""

from __future__ import annotations

from ..api.schemas import SpeechRequest
from ..errors import InvalidInputError, NotFoundError
from ..model.prompt import VoiceRequest
from ..model.tts_model import Qwen3TTSModel
from ..model.voice_prompt import VoicePrompt
from .voice_library import VoiceLibrary

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


def preset_voices(model: Qwen3TTSModel) -> dict[str, str]:
    """Every voice name this model answers to (presets and OpenAI aliases) -> its preset speaker."""
    voices = {name: name for name in model.speakers}
    voices.update({alias: target for alias, target in OPENAI_VOICES.items() if target in voices})
    return voices


def resolve_voice(
    model: Qwen3TTSModel, body: SpeechRequest, library: VoiceLibrary, clone: VoicePrompt | None = None
) -> VoiceRequest:
    """The voice a request names (a preset, an OpenAI alias, a library voice; `clone`: an inline cloned voice)
    as a VoiceRequest for its whole text."""
    language = body.language or "auto"
    if clone is not None:
        return VoiceRequest(body.input, language, instruct=body.instructions, voice=clone)
    stored = library.find(body.voice_name)
    if stored is not None and stored.type == "audio_sample":
        prompt = library.clone_prompt(stored)
        return VoiceRequest(body.input, language, instruct=body.instructions, voice=prompt)
    if stored is not None and model.model_type != "voice_design":
        raise InvalidInputError(
            f"voice {stored.id} is a designed voice (a description); a VoiceDesign model speaks it, "
            f"this server runs a {model.model_type} model",
            param="voice",
        )
    if model.model_type == "custom_voice":
        voices = preset_voices(model)
        speaker = voices.get(body.voice_name.lower())
        if speaker is None:
            raise NotFoundError(
                f"unknown voice {body.voice_name!r}; available: {', '.join(sorted(voices))}", param="voice"
            )
        return VoiceRequest(body.input, language, speaker=speaker, instruct=body.instructions)
    if model.model_type == "voice_design":
        description = " ".join(filter(None, [stored.prompt if stored else None, body.instructions]))
        if not description.strip():
            raise InvalidInputError(
                "a VoiceDesign model needs `instructions` describing the voice, or a voice created from a "
                "description (POST /v1/audio/voices with type=prompt)",
                "instructions",
            )
        return VoiceRequest(body.input, language, instruct=description)
    cloned = [voice.id for voice in library.list() if voice.type == "audio_sample"]
    raise NotFoundError(
        f"unknown voice {body.voice_name!r}: a Base model speaks cloned voices; upload one with "
        f"POST /v1/audio/voices or use POST /v1/audio/speech/clone"
        + (f"; library voices: {', '.join(cloned)}" if cloned else ""),
        param="voice",
    )
