"""The names a voice answers to: the preset speakers, OpenAI's voice names mapped onto them, and the library's voices
by name. Routing (which model speaks a voice) and voice resolution both read them."""

from __future__ import annotations

from .voice_library import VoiceLibrary, voice_key

# OpenAI's built-in voice names, each mapped to a preset speaker of the CustomVoice models. The first six are
# the earlier server's aliases (the same speaker a caller heard there); the later seven it did not map get a fixed
# speaker each (README, "Voices").
OPENAI_VOICES = {
    "alloy": "ryan",
    "echo": "aiden",
    "fable": "dylan",
    "onyx": "uncle_fu",
    "nova": "vivian",
    "shimmer": "serena",
    "ash": "eric",
    "ballad": "dylan",
    "coral": "sohee",
    "sage": "ono_anna",
    "verse": "aiden",
    "marin": "vivian",
    "cedar": "ryan",
}


# Names only preset voices may have in the voice library: the speakers and the OpenAI names (make-preset-voices).
RESERVED_NAMES = frozenset(OPENAI_VOICES) | frozenset(OPENAI_VOICES.values())


def preset_voices(speakers: list[str]) -> dict[str, str]:
    """Every voice name a model with these preset speakers answers to (presets, then the OpenAI aliases) -> its
    preset speaker."""
    voices = {name: name for name in speakers}
    voices.update({alias: target for alias, target in OPENAI_VOICES.items() if target in voices})
    return voices


def accepted_names(speakers: list[str], library: VoiceLibrary) -> list[str]:
    """Every voice name a request may give: the presets and their OpenAI aliases, then the library's voices by name,
    with the OpenAI names of the preset voices made for a Base model (make-preset-voices) after theirs."""
    names = list(preset_voices(speakers))
    stored = [voice.name for voice in library.list()]
    keys = {voice_key(name) for name in stored}
    aliases = [alias for alias, speaker in OPENAI_VOICES.items() if speaker in keys and alias not in names]
    return names + [name for name in dict.fromkeys(stored) if name not in names] + aliases
