"""One request's audio: its segments spoken back to back as one stream, encoded, as bytes or SSE events
(`SpeechStream`); `SpeechOutput` is what it shares with audio replayed from the output cache.

Segment N+1's engine job is submitted when segment N starts playing, so the engine generates it while N is
heard; at most two rows per request. Where two segments meet, 10 ms fades keep the join free of clicks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from urllib.parse import quote

import numpy as np

from ...audio.encoding import StreamEncoder
from ...audio.seams import fade_seams
from ...audio.tempo import Tempo
from ...engine.jobs import Audience, AudioChunk, RequestClock, SpeechJob
from ...engine.synthesis import Engine, JobStream
from ...errors import TTSError, error_body
from ...text.frontend import TextSegment
from .alignment import SegmentTiming, TimedSegment

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class SpeechOutput(ABC):
    """A prepared request's audio, generated or from the output cache: iterate `audio()` or `sse()` once, or
    `aclose()` it unplayed. The timings (seconds) are filled in as it plays."""

    segments: list[TextSegment]
    media_type: str
    sample_rate: int
    frame_seconds: float  # the model's frame duration
    text_tokens: int
    cache: str = "off"  # the output cache: "hit", "miss" (stored once complete) or "off"
    model: str = ""  # the id of the hosted model that speaks it
    started: float = field(default_factory=time.perf_counter)
    frames: int = 0
    cut_segments: list[int] = field(default_factory=list)  # segments that reached their frame budget
    first_audio: float | None = None  # from prepare() to the first encoded audio
    queue_seconds: float = 0.0  # the first segment's wait for an engine row
    infer_seconds: float = 0.0  # from the first admission to the last frame
    encode_seconds: float = 0.0  # speed change and encoding
    total_seconds: float = 0.0  # from prepare() to the last byte
    finished: bool = False  # every byte was produced (False: the client left, or it failed)
    timing: SegmentTiming | None = None  # word timestamps asked for: each segment is timed once its audio is made
    timed: list[asyncio.Task[TimedSegment]] = field(default_factory=list)  # a task per segment made, in order
    _times_read: int = 0

    @abstractmethod
    def start(self, continuation: bool = False, audience: Audience | None = None) -> None:
        """Start making the audio. `continuation`: it follows audio of the same listener already under way (never
        refused for a full queue, admitted first). `audience`: the listener it shares with the outputs played before
        it (a WebSocket session's), so that the audio made ahead of it is bounded across them all."""

    @abstractmethod
    def audio(self) -> AsyncGenerator[bytes, None]:
        """The encoded audio, piece by piece as it is ready."""

    @abstractmethod
    async def aclose(self) -> None:
        """Give up the request's engine rows, if any."""

    async def whole(self) -> bytes:
        """All of `audio()` as one file (a response with a Content-Length): a WAV or FLAC with its exact length."""
        return self.as_file(b"".join([part async for part in self.audio()]))

    def as_file(self, audio: bytes) -> bytes:
        """`audio()`'s bytes as a file sent in one piece; stored audio already is one."""
        return audio

    @property
    def languages(self) -> list[str]:
        return list(dict.fromkeys(segment.language for segment in self.segments))

    @property
    def audio_seconds(self) -> float:
        return self.frames * self.frame_seconds

    def text_headers(self, include_text: bool) -> dict[str, str]:
        """What the front end made of the text, and the hosted model that speaks it: known before the first byte, so
        every response carries it."""
        headers = {"X-Language": ",".join(self.languages), "X-Segments": str(len(self.segments))}
        if self.model:
            headers["X-Model"] = self.model
        if self.cache != "off":
            headers["X-Cache"] = self.cache
        if include_text:  # percent-encoded UTF-8; segments separated by a newline
            headers["X-Spoken-Text"] = quote("\n".join(segment.text for segment in self.segments))
        return headers

    def result_headers(self) -> dict[str, str]:
        """The whole-file response's audio frames (the model's, as `usage.output_tokens` counts them), its timing
        breakdown in milliseconds, and any segment cut by its budget."""
        parts = {
            "Queue": self.queue_seconds,
            "First-Audio": self.first_audio or 0.0,
            "Infer": self.infer_seconds,
            "Encode": self.encode_seconds,
            "Total": self.total_seconds,
        }
        headers = {"X-Audio-Frames": str(self.frames)}
        headers |= {f"X-Latency-{name}-Ms": f"{1000 * seconds:.1f}" for name, seconds in parts.items()}
        if self.cut_segments:
            headers["X-Segments-Cut"] = ",".join(map(str, self.cut_segments))
        return headers

    def times_ready(self) -> list[TimedSegment]:
        """The segments timed since the last call, in order, as far as timing has got."""
        ready = []
        while self._times_read < len(self.timed) and self.timed[self._times_read].done():
            ready.append(self.timed[self._times_read].result())
            self._times_read += 1
        return ready

    async def with_times(self) -> AsyncIterator[tuple[bytes, list[TimedSegment]]]:
        """`audio()`'s pieces, each with the segments timed by then; the segments timed last follow the audio,
        with no bytes."""
        async for data in self.audio():
            yield data, self.times_ready()
        left = [await task for task in self.timed[self._times_read :]]
        self._times_read = len(self.timed)
        if left:
            yield b"", left

    async def sse(self, include_text: bool = False) -> AsyncIterator[bytes]:
        if include_text:
            segments = [{"text": s.text, "language": s.language} for s in self.segments]
            yield _event({"type": "speech.text", "segments": segments})
        try:
            async for data, timed in self.with_times():
                if data:
                    yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
                for segment in timed:
                    yield _event(words_event(segment))
        except TTSError as exc:  # the headers are sent: the error becomes an event
            yield _event({"type": "error", "error": error_body(exc)})
            return
        done = {"type": "speech.audio.done", "usage": usage(self.text_tokens, self.frames)}
        if self.cut_segments:
            done["segments_cut"] = self.cut_segments
        yield _event(done)


@dataclass(kw_only=True)
class SpeechStream(SpeechOutput):
    """Audio generated by the engine, segment after segment, encoded as it comes."""

    engine: Engine
    jobs: list[SpeechJob]  # one per segment
    encoder: StreamEncoder
    tempo: Tempo | None = None  # speed != 1
    model_rate: int = 24000  # of the engine's audio
    timeout: float | None = None  # seconds the whole request may take, time paused for its client not counted
    # Told the complete response as one file once it has played to the end (the output cache stores it).
    on_complete: Callable[[bytes], Awaitable[None]] | None = None
    _running: deque[JobStream] = field(default_factory=deque)
    _clock: RequestClock | None = None

    def start(self, continuation: bool = False, audience: Audience | None = None) -> None:
        """Submit the first segment's job; raises at once when the engine refuses it (a full queue)."""
        self._clock = RequestClock(self.timeout, audience)
        first = replace(self.jobs[0], continuation=True) if continuation else self.jobs[0]
        self._running.append(self.engine.submit(first, self._clock))

    async def chunks(self) -> AsyncIterator[tuple[int, AudioChunk]]:
        """(segment, chunk) for every segment's chunks in order, the next segment submitted as this one starts."""
        for index in range(len(self.jobs)):
            if index + 1 < len(self.jobs):
                following = replace(self.jobs[index + 1], continuation=True)
                self._running.append(self.engine.submit(following, self._clock))
            current = self._running[0]
            made: list[np.ndarray] = []
            async for chunk in current:
                if index == 0:
                    self.queue_seconds = chunk.queue_seconds
                if chunk.finish_reason == "length":
                    self.cut_segments.append(index)
                    text = self.segments[index].text
                    log.warning(
                        "segment %d of %d (%d characters) reached its frame budget", index, len(self.jobs), len(text)
                    )
                    log.debug("the segment cut by its budget: %r", text)
                chunk = self._faded(chunk, index)
                if self.timing is not None:
                    made.append(chunk.audio)
                yield index, chunk
            self._running.popleft()
            if self.timing is not None:
                audio = np.concatenate(made) if made else np.zeros(0, np.float32)
                self.timed.append(self.timing.segment_done(self.segments[index], audio, self.model_rate))

    def _faded(self, chunk: AudioChunk, index: int) -> AudioChunk:
        """Fade in a segment's first samples after a seam and fade out its last samples before one."""
        fade_in = index > 0 and chunk.first_frame == 0
        fade_out = index + 1 < len(self.jobs) and chunk.finish_reason is not None
        if not (fade_in or fade_out):
            return chunk
        return replace(chunk, audio=fade_seams(chunk.audio, fade_in, fade_out))

    async def audio(self) -> AsyncGenerator[bytes, None]:
        body: list[bytes] | None = [] if self.on_complete is not None else None
        try:
            async for _, chunk in self.chunks():
                self.frames += chunk.frames
                self.infer_seconds = time.perf_counter() - self.started - self.queue_seconds
                data = self._encode(chunk.audio)
                if self.first_audio is None:
                    self.first_audio = time.perf_counter() - self.started
                if data:
                    if body is not None:
                        body.append(data)
                    yield data
            tail = self._encode(None)
            self.total_seconds = time.perf_counter() - self.started
            if tail:
                if body is not None:
                    body.append(tail)
                yield tail
            self.finished = True
            if body is not None:
                await self.on_complete(self.as_file(b"".join(body)))
        finally:
            await self.aclose()  # a client that went away frees its engine rows

    async def aclose(self) -> None:
        while self._running:
            await self._running.popleft().aclose()

    def as_file(self, audio: bytes) -> bytes:
        return self.encoder.as_file(audio)

    def _encode(self, audio: np.ndarray | None) -> bytes:
        """Encode one chunk of audio, or with None flush the speed change and the encoder."""
        began = time.perf_counter()
        if audio is None:
            data = (self.encoder.write(self.tempo.flush()) if self.tempo else b"") + self.encoder.close()
        else:
            data = self.encoder.write(self.tempo.process(audio) if self.tempo else audio)
        self.encode_seconds += time.perf_counter() - began
        return data


def words_event(timed: TimedSegment) -> dict:
    """A segment's word timestamps as the speech events carry them; an error in place of the words if the aligner
    could not time them."""
    if timed.error is not None:
        return {"type": "speech.words", **timed.fields(), "error": error_body(timed.error)}
    return {"type": "speech.words", **timed.fields()}


def usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    """OpenAI's usage object: text tokens in, audio frames out."""
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens}


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
