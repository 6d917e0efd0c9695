"""What the model layer gives for a live utterance run alone, pass by pass, and what a live session gives in this
process through the recognition engine: what the engine, the sessions and the protocols are checked against."""

from __future__ import annotations

import asyncio

import numpy as np

from qwen3_tts_server.audio.voice_activity import VoiceActivitySettings
from qwen3_tts_server.engine.recognition import RecognitionEngine
from qwen3_tts_server.model.asr.streaming import IncrementalPasses, LiveUtterance, StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.service.recognition.live import LiveSession, LiveTranscript

CHUNK = 32000  # samples: the algorithm's 2 s chunks at 16 kHz
CLEAR = object()  # in `session_events`' feeds: the session is cleared there


def pass_by_pass(
    transcriber: Transcriber,
    wave: np.ndarray,
    settings: StreamingSettings | None = None,
    language: str | None = None,
    field: str = "text",
) -> list[str]:
    """The utterance's `field` ("text" or "output") after each pass over `wave` fed in 2 s chunks, the tail's last."""
    utterance = LiveUtterance(
        transcriber, IncrementalPasses(transcriber, "", language), settings or StreamingSettings()
    )
    seen = []
    for start in range(0, len(wave), CHUNK):
        if utterance.feed(wave[start : start + CHUNK]):
            seen.append(getattr(utterance, field))
    utterance.finish()
    return [*seen, getattr(utterance, field)]


def session_events(
    transcriber: Transcriber,
    feeds: list,
    rate: int = 16000,
    voice_activity: VoiceActivitySettings | None = None,
    commit: bool = True,
    language: str | None = None,
    streaming: StreamingSettings | None = None,
    max_utterance_seconds: float | None = None,
) -> list:
    """A live session on its own engine: each piece of `feeds` appended in turn (CLEAR: the session cleared
    instead), a commit if asked, then closed; all its events."""
    engine = RecognitionEngine(transcriber, max_batch_size=2).start()

    async def scenario():
        session = LiveSession(engine, rate, language, voice_activity=voice_activity, streaming=streaming)
        if max_utterance_seconds is not None:
            session.max_utterance_seconds = max_utterance_seconds
        await session.start()
        for piece in feeds:
            if piece is CLEAR:
                session.clear()
            else:
                session.append(piece)
            await asyncio.sleep(0)
        if commit:
            session.commit()
        await session.close()
        events = []
        while (event := session.events.get_nowait()) is not None:
            events.append(event)
        return events

    try:
        return asyncio.run(scenario())
    finally:
        engine.stop()


def listened(events: list) -> list:
    """A session's events from its listening task (speech boundaries, commits), in their order."""
    return [event for event in events if not isinstance(event, LiveTranscript)]


def transcribed(events: list) -> list:
    """A session's transcripts (from its transcribing task), in their order."""
    return [event for event in events if isinstance(event, LiveTranscript)]
