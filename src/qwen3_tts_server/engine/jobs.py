"""What goes into the engine (a `SpeechJob`) and what comes out (`AudioChunk`s)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..model.prompt import TokenizedInput
from ..model.sampling import SamplingParams

DEFAULT_CHUNK_SCHEDULE = (1, 2, 4, 8)


@dataclass(frozen=True)
class SpeechJob:
    input: TokenizedInput  # checked and tokenized: the engine only embeds and prefills it
    params: SamplingParams
    max_frames: int | None = None  # default: the model's budget from the text length
    interactive: bool = True  # streamed requests are admitted before whole-file ones
    # A later segment of a request already under way: never refused for a full queue, and admitted first.
    continuation: bool = False
    timeout: float | None = None  # seconds from submission
    # Frames per audio chunk: the listed sizes, then the last one repeated.
    chunk_schedule: tuple[int, ...] = DEFAULT_CHUNK_SCHEDULE
    suppress_eos: bool = False  # run to max_frames (benchmarks)

    def chunk_sizes(self) -> Iterator[int]:
        yield from self.chunk_schedule
        yield from itertools.repeat(self.chunk_schedule[-1])


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
