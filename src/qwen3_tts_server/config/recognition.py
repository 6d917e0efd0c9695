"""Recognition settings: how large and long a recording to transcribe may be, each part's token budget, the Korean
word list, subtitle cues, and the chat model that translates transcripts."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr

from .group import SettingsGroup

MAX_TRANSCRIPTION_BYTES = 25 * 2**20  # OpenAI's upload limit for a recording to transcribe
# A recording's longest duration: what it may decode to is bounded, not only its bytes (a few KB of FLAC can declare
# hours). 30 minutes: about 25 MiB of MP3 at 112 kbps, and more than one of the official 20-minute parts.
MAX_TRANSCRIPTION_SECONDS = 1800.0


class RecognitionSettings(SettingsGroup):
    """Limits of a recording to transcribe, word timestamps, subtitles and translation."""

    title = "Recognition"

    max_transcription_bytes: int = Field(
        MAX_TRANSCRIPTION_BYTES,
        ge=1,
        description="bytes a recording to transcribe may be (an upload, or a Wyoming utterance); past it a 413 "
        "(default 25 MiB, OpenAI's limit)",
    )
    max_transcription_seconds: float = Field(
        MAX_TRANSCRIPTION_SECONDS,
        gt=0,
        description="seconds a recording to transcribe may last; decoding stops there with a 400 audio_too_long "
        "(default 1800 s: 30 minutes, about 25 MiB of MP3 at 112 kbps)",
    )
    max_transcription_tokens: int | None = Field(
        None,
        ge=1,
        description="tokens one part of a recording may decode (the official package's max_new_tokens); reaching it "
        "ends the part as cut; unset: 16 a second of its audio, at least 64",
    )
    korean_words: Path | None = Field(
        None,
        description="the official Korean word list for Korean word timestamps (korean_dict_jieba.dict of the "
        "qwen-asr package; default: the list of an installed qwen-asr)",
    )
    subtitle_max_duration: float = Field(7.0, gt=0, description="seconds a subtitle cue lasts at most")
    subtitle_pause_threshold: float = Field(
        0.5, ge=0, description="seconds of silence between two words that end a subtitle cue"
    )
    subtitle_min_duration: float = Field(
        0.833, ge=0, description="seconds a subtitle cue is held at least, where the next one leaves room"
    )
    subtitle_min_gap: float = Field(0.083, ge=0, description="seconds between two subtitle cues at least")
    translate_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("translate_base_url", "openai_base_url"),
        description="an OpenAI-compatible chat API (e.g. http://localhost:11434/v1) that /v1/audio/translations "
        "sends transcripts to; unset, that route answers 501 (also OPENAI_BASE_URL, the earlier ASR server's name)",
    )
    translate_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("translate_api_key", "openai_api_key"),
        description="its API key, if it needs one (also OPENAI_API_KEY)",
    )
    translate_model: str | None = Field(None, description="the chat model that translates, e.g. qwen3:8b")
