"""What the Wyoming server speaks with: the app's services, handed over by the API layer."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.registry import ModelRegistry
from ..service.recognition.transcription import RecognitionService
from ..service.speech.realtime import RequestParser
from ..service.speech.synthesis import SpeechService
from ..service.speech.voices import VoiceService


@dataclass(frozen=True)
class WyomingBackend:
    speech: SpeechService
    voices: VoiceService
    registry: ModelRegistry  # the hosted models: each voice is spoken by the one the request routes to
    parse: RequestParser  # a config and a text validated as a POST /v1/audio/speech body (the API layer's)
    max_pending_text: int  # characters a streamed synthesis may have waiting to be spoken (MAX_PENDING_TEXT)
    recognition: dict[str, RecognitionService] = field(default_factory=dict)  # by recogniser id: speech to text
    live_max_pending_seconds: float = 30.0  # audio an utterance may have waiting for recognition (LIVE_MAX_...)
    live_idle_timeout: float = 0.0  # seconds an utterance's audio may pause before its audio-stop (0: no limit)
