"""`describe` answered: one TTS program listing every voice the server knows, as Home Assistant offers them, and
one ASR program listing the hosted Qwen3-ASR models with the languages they hear."""

from __future__ import annotations

import asyncio
from importlib.metadata import version

from wyoming.info import AsrModel, AsrProgram, Attribution, Info, TtsProgram, TtsVoice

from ..model.asr.languages import language_code
from .backend import WyomingBackend
from .languages import language_codes

PROGRAM = "qwen3-tts"
ASR_PROGRAM = "qwen3-asr"
ATTRIBUTION = Attribution(name="Qwen (Alibaba Cloud)", url="https://github.com/QwenLM/Qwen3-TTS")
ASR_ATTRIBUTION = Attribution(name="Qwen (Alibaba Cloud)", url="https://github.com/QwenLM/Qwen3-ASR")
# The voices each model type speaks; the others are listed as not installed, and Home Assistant leaves them out.
SPOKEN = {"custom_voice": {"preset", "alias"}, "base": {"audio_sample"}, "voice_design": {"prompt"}}
KINDS = {"audio_sample": "cloned voice", "prompt": "designed voice"}


async def describe(backend: WyomingBackend) -> Info:
    """Presets, OpenAI aliases and library voices (GET /v1/audio/voices) of every hosted model, each in every
    language of the models; from the checkpoints' configs: no model is loaded for it. A server of recognisers alone
    lists no speech program."""
    if not len(backend.registry):
        return Info(tts=[], asr=_recognition(backend))
    configs = [await asyncio.to_thread(hosted.manager.config) for hosted in backend.registry]
    languages = language_codes(list(dict.fromkeys(language for config in configs for language in config.languages)))
    spoken = set().union(*(SPOKEN.get(config.model_type, set()) for config in configs))
    voices = [
        TtsVoice(
            name=voice["id"],
            description=_description(voice),
            attribution=ATTRIBUTION,
            installed=bool(voice["models"]) if "models" in voice else voice["type"] in spoken,
            version=None,
            languages=languages,
        )
        for voice in await backend.voices.list_voices()
    ]
    program = TtsProgram(
        name=PROGRAM,
        description=f"Qwen3-TTS ({backend.registry.default.id})",
        attribution=ATTRIBUTION,
        installed=True,
        version=version("qwen3-tts-server"),
        voices=voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program], asr=_recognition(backend))


def _recognition(backend: WyomingBackend) -> list[AsrProgram]:
    """The hosted recognisers as one program, its text streamed as decoded (none when none is hosted)."""
    models = [
        AsrModel(
            name=hosted.id,
            description=f"Qwen3-ASR ({hosted.id})",
            attribution=ASR_ATTRIBUTION,
            installed=True,
            version=None,
            languages=[language_code(name) or name for name in hosted.description.languages]
            if hosted.description
            else [],
        )
        for hosted in backend.registry.recognizers
    ]
    if not models:
        return []
    program = AsrProgram(
        name=ASR_PROGRAM,
        description="Qwen3-ASR speech to text",
        attribution=ASR_ATTRIBUTION,
        installed=True,
        version=version("qwen3-tts-server"),
        models=models,
        supports_transcript_streaming=True,
    )
    return [program]


def _description(voice: dict) -> str:
    """The name Home Assistant shows: a preset's name (`Uncle Fu`), an alias with its preset, a library voice's
    name with its kind."""
    if voice["type"] == "preset":
        return _preset_name(voice["name"])
    if voice["type"] == "alias":
        return f"{voice['name']} ({_preset_name(voice['alias_of'])})"
    kind = KINDS.get(voice["type"])
    return f"{voice['name']} ({kind})" if kind else voice["name"]


def _preset_name(speaker: str) -> str:
    return speaker.replace("_", " ").title()
