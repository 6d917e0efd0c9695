"""What goes into the engine (a `SpeechJob`) and what comes out (`AudioChunk`s)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..model.tts.prompt import TokenizedInput
from ..model.tts.sampling import SamplingParams

DEFAULT_CHUNK_SCHEDULE = (1, 2, 4, 8)
WHOLE_SEGMENT = (1 << 30,)  # one chunk per segment: its audio once its last frame is made (stream_mode sentence)


@dataclass(frozen=True)
class SpeechJob:
    input: TokenizedInput  # checked and tokenized: the engine only embeds and prefills it
    params: SamplingParams
    max_frames: int | None = None  # default: the model's budget from the text length
    interactive: bool = True  # streamed requests are admitted before whole-file ones
    # A later segment of a request already under way: never refused for a full queue, and admitted first.
    continuation: bool = False
    timeout: float | None = None  # seconds from submission, when submitted without a RequestClock
    # Frames per audio chunk: the listed sizes, then the last one repeated.
    chunk_schedule: tuple[int, ...] = DEFAULT_CHUNK_SCHEDULE
    suppress_eos: bool = False  # run to max_frames (benchmarks)

    def chunk_sizes(self) -> Iterator[int]:
        yield from self.chunk_schedule
        yield from itertools.repeat(self.chunk_schedule[-1])


class Audience:
    """The listener of one or more requests that play to it in turn: a long text's segments (one request), a
    WebSocket session's clauses (a request each). The synthesis engine bounds the audio made ahead of it across all
    their jobs (`Engine._apply_backpressure`); `took` is called on the event loop as it takes audio."""

    def __init__(self) -> None:
        self.last_taken = time.monotonic()

    def took(self) -> None:
        self.last_taken = time.monotonic()


class RequestClock:
    """A request's time limit and its client's progress, shared by the engine jobs of its segments.

    Time a stream spends paused because its client has not taken its audio yet (backpressure) does not count
    against the limit: a client listening at real time to a long text is never cut by it. A client that takes no
    audio for `timeout` seconds while its stream is paused is the one that has stalled, and is dropped. `audience`:
    the listener it plays to, when it shares one with other requests (else its own).
    `took` is called on the event loop; the rest on the engine thread."""

    def __init__(self, timeout: float | None, audience: Audience | None = None):
        now = time.monotonic()
        self.timeout = timeout or None
        self.deadline = now + timeout if timeout else None
        self.audience = audience or Audience()
        self._paused_streams = 0
        self._paused_since = now

    def took(self) -> None:
        """The client took audio."""
        self.audience.took()

    def pause(self, now: float) -> None:
        if self._paused_streams == 0:
            self._paused_since = now
        self._paused_streams += 1

    def resume(self, now: float) -> None:
        self._paused_streams -= 1
        if self._paused_streams == 0 and self.deadline is not None:
            self.deadline += now - self._paused_since

    def over_time(self, now: float) -> bool:
        """Past the time limit, time paused for the client not counted."""
        return self.deadline is not None and not self._paused_streams and now > self.deadline

    def client_stalled(self, now: float) -> bool:
        """Paused, and the client has taken nothing for the time limit."""
        return self.timeout is not None and bool(self._paused_streams) and now - self.audience.last_taken > self.timeout

    def stall_check_in(self, now: float) -> float | None:
        """Seconds until `client_stalled` could turn true; None: never without a change."""
        if self.timeout is None or not self._paused_streams:
            return None
        return max(0.0, self.audience.last_taken + self.timeout - now)


@dataclass(frozen=True)
class AudioChunk:
    """Consecutive frames of one job: float32 mono audio in [-1, 1] at the model's sample rate."""

    audio: np.ndarray
    codes: np.ndarray  # (frames, num_code_groups)
    first_frame: int
    queue_seconds: float  # from submission to admission
    elapsed_seconds: float  # from submission to this chunk
    finish_reason: str | None = None  # set on the last chunk: "eos" or "length" (the frame budget)

    @property
    def frames(self) -> int:
        return len(self.codes)
