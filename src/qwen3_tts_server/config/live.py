"""Live transcription settings: voice activity detection and the limits of a live session (WS /ws/transcribe,
realtime transcription, a Wyoming utterance)."""

from __future__ import annotations

from pydantic import AliasChoices, Field

from .group import SettingsGroup


class LiveSettings(SettingsGroup):
    """Live transcription sessions: voice activity, and what a session may hold and how long it may stay quiet."""

    title = "Live transcription"

    live_server_vad: bool = Field(
        True,
        validation_alias=AliasChoices("live_server_vad", "asr_use_server_vad"),
        description="voice activity ends the utterances of live sessions unless a session says otherwise",
    )
    vad_threshold: float = Field(0.5, gt=0, lt=1, description="speech probability that starts speech (Silero VAD)")
    vad_prefix_padding_ms: int = Field(300, ge=0, description="audio kept before speech starts, in ms")
    vad_silence_ms: int = Field(500, ge=0, description="silence that ends an utterance, in ms")
    live_max_pending_seconds: float = Field(
        30.0, gt=0, description="seconds of audio a live session may have waiting for recognition; past it an error"
    )
    live_max_sessions: int = Field(
        0,
        ge=0,
        description="live sessions (WS /ws/transcribe, realtime, Wyoming) each transcriber serves at once; past it "
        "a new one is refused (503 live_session_limit); 0: no limit",
    )
    live_idle_timeout: float = Field(
        60.0,
        ge=0,
        description="seconds a live WebSocket (WS /ws/transcribe, realtime transcription) may go without a message "
        "from its client or to it, and a Wyoming utterance without audio before its audio-stop; then a 408 "
        "idle_timeout error (and close 1001), its session slot given back; 0: never",
    )
