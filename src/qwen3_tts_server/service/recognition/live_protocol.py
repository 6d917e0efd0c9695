"""What the live recognition protocols of other providers share (Deepgram's, Cartesia's): their queries' numbers and
key terms, the shortest silence that ends speech, raw audio decoded as it arrives in messages of any length, and one
live session a socket (`live.py`), its events forwarded as the protocol's messages."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from ...audio.decoding import decode_g711, pcm_samples
from ...audio.voice_activity import VoiceActivitySettings
from ...errors import InvalidInputError, shown
from ...model.asr.streaming import StreamingSettings
from .live import LiveEvent, LiveSession, cancelled
from .transcription import RecognitionService, check_context

SendMessage = Callable[[dict[str, Any]], Awaitable[None]]
INTERIM_SECONDS = 1.0  # audio a pass adds: an interim transcript every second of speech, as these providers send
RAW_WIDTHS = {"pcm_s16le": 2, "pcm_s32le": 4, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}  # bytes a sample
MIN_SILENCE_MS = 300  # the shortest silence taken as the end of speech: shorter pauses are within words


def query_integer(query: dict[str, str], name: str, low: int, high: int) -> int | None:
    """The query's whole number `name` (None where not given), refused outside `low` to `high`."""
    value = query.get(name)
    if value is None:
        return None
    if not value.strip().isdigit() or not low <= int(value) <= high:
        raise InvalidInputError(f"{name} is a whole number from {low} to {high}, not {shown(value)}", param=name)
    return int(value)


def key_terms(items: Sequence[tuple[str, str]], names: Sequence[str]) -> str:
    """The query's key terms (its values of `names`; Deepgram's `keywords` as `word:boost`, the boost dropped) as the
    transcriber's context, once each."""
    terms = [value if name == "keyterm" else value.rsplit(":", 1)[0] for name, value in items if name in names]
    return ", ".join(dict.fromkeys(term.strip() for term in terms if term.strip()))


def end_of_speech(silence_ms: int) -> VoiceActivitySettings:
    """Voice activity that ends speech after `silence_ms` of silence, MIN_SILENCE_MS at the least."""
    return VoiceActivitySettings(silence_duration_ms=max(silence_ms, MIN_SILENCE_MS))


def provider_session(
    service: RecognitionService,
    rate: int,
    language: str | None,
    context: str,
    voice_activity: VoiceActivitySettings | None,
    max_pending: float,
) -> LiveSession:
    """A live session of `service`'s transcriber for a provider's socket: a pass every INTERIM_SECONDS of audio, one
    of the transcriber's live session slots held."""
    streaming = StreamingSettings(chunk_seconds=INTERIM_SECONDS)
    return LiveSession(
        service.engine, rate, language, context, voice_activity, max_pending, streaming, service.live_slots
    )


class RawAudio:
    """Raw little-endian samples of `encoding` (a key of RAW_WIDTHS) in `channels` interleaved channels, mixed to
    one; a frame split between two messages is carried to the next."""

    def __init__(self, encoding: str, channels: int = 1):
        self.encoding, self.channels = encoding, channels
        self.frame = RAW_WIDTHS[encoding] * channels
        self.frames = 0  # taken so far
        self._carried = b""

    def samples(self, data: bytes) -> np.ndarray:
        data = self._carried + data
        whole = len(data) - len(data) % self.frame
        self._carried, data = data[whole:], data[:whole]
        self.frames += len(data) // self.frame
        if self.encoding in ("pcm_mulaw", "pcm_alaw"):
            return decode_g711(data, self.encoding).reshape(-1, self.channels).mean(axis=1, dtype=np.float32)
        if self.encoding == "pcm_f32le":
            return np.frombuffer(data, "<f4").reshape(-1, self.channels).mean(axis=1, dtype=np.float32)
        return pcm_samples(data, RAW_WIDTHS[self.encoding], self.channels)


class LiveProtocol(ABC):
    """One socket's live session: `start`, then `audio` for each binary message and `control` for each text one,
    `finish` when the client ends the stream, `cancel` when it is gone; `forward` sends each of the session's events
    as the protocol says it."""

    def __init__(self, live: LiveSession, audio: RawAudio, send: SendMessage):
        self.live, self.raw, self.send = live, audio, send
        self._pump: asyncio.Task | None = None

    @property
    def seconds(self) -> float:
        """The audio taken so far."""
        return self.raw.frames / self.live.rate

    async def start(self) -> None:
        """The key terms (the session's context) checked as a prompt is, then the live session started."""
        check_context(await self.live.engine.models.get_async(), self.live.context, "keyterm")
        await self.live.start()
        self._pump = asyncio.create_task(self._forward())

    def audio(self, data: bytes) -> bool:
        """Audio taken (False where the message held no whole frame yet)."""
        samples = self.raw.samples(data)
        if not len(samples):
            return False
        self.live.append(samples)
        return True

    async def finish(self) -> None:
        """What is held transcribed, and every event sent."""
        await self.live.close()
        if self._pump is not None:
            await self._pump

    async def cancel(self) -> None:
        await self.live.cancel()
        await cancelled(self._pump)

    async def _forward(self) -> None:
        while (event := await self.live.events.get()) is not None:
            await self.forward(event)

    @abstractmethod
    def control(self, text: str) -> bool:
        """A client's text message taken (InvalidInputError: refused); False where it ends the stream."""

    @abstractmethod
    async def forward(self, event: LiveEvent) -> None:
        """One of the session's events, as the protocol's messages."""
