"""Word timestamps of what the server says: each segment's audio, once made, aligned with its text as spoken by the
hosted ForcedAligner (a recogniser's, or one hosted beside speech models alone), in a worker thread beside the
engine's, so that the audio itself is never held up; the words are then the client's (`word_times`)."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...engine.model_manager import ModelManager
from ...errors import AlignmentFailedError, InvalidInputError, TTSError
from ...model.asr.aligner import ForcedAligner, TimedWord
from ...model.asr.mel import model_wave
from ...model.asr.transcriber import Transcriber
from ...text.frontend import TextSegment
from .word_times import clamped, client_word_times

log = logging.getLogger(__name__)
NO_ALIGNER = (
    "word timestamps of speech need a ForcedAligner: add one to MODELS (Qwen/Qwen3-ForcedAligner-0.6B), beside the "
    "speech models"
)


@dataclass(frozen=True)
class TimedSegment:
    """A spoken segment's words, in seconds from the start of the output it belongs to."""

    index: int  # its place among the output's segments
    text: str  # as the client sent it
    start: float  # its audio's span
    end: float
    words: list[TimedWord] = field(default_factory=list)
    error: TTSError | None = None  # why its words could not be timed (its audio played all the same)

    def fields(self) -> dict[str, Any]:
        """As the speech events carry it."""
        described: dict[str, Any] = {"segment": self.index, "text": self.text, "start": self.start, "end": self.end}
        described["words"] = [{"word": word.text, "start": word.start, "end": word.end} for word in self.words]
        return described


class SpeechAligner:
    """Times synthesised segments with the model of `manager`: a ForcedAligner, or a transcriber that holds one.
    One alignment runs at a time."""

    def __init__(self, manager: ModelManager):
        self.manager = manager
        self._lock = threading.Lock()

    async def aligner(self) -> ForcedAligner:
        model = await self.manager.get_async()
        aligner = model.aligner if isinstance(model, Transcriber) else model
        if not isinstance(aligner, ForcedAligner):
            raise InvalidInputError(NO_ALIGNER, param="timestamps")
        return aligner

    async def time(
        self, index: int, segment: TextSegment, audio: np.ndarray, rate: int, offset: float, speed: float = 1.0
    ) -> TimedSegment:
        """Segment `index`'s words: `audio` (mono float32 at `rate`, before any speed change) is what was made of
        it, and its output begins `offset` seconds into the output."""
        end = round(offset + len(audio) / rate / speed, 3)
        try:
            aligner = await self.aligner()
            words = await asyncio.to_thread(self._align, aligner, segment, audio, rate, offset, speed)
        except TTSError as exc:
            return TimedSegment(index, segment.source, round(offset, 3), end, error=exc)
        except Exception as exc:  # a fault of the aligner: the audio has played, the words are reported missing
            log.exception("aligning segment %d failed: %s", index, exc)
            failed = AlignmentFailedError("the words of this segment could not be timed")
            return TimedSegment(index, segment.source, round(offset, 3), end, error=failed)
        return TimedSegment(index, segment.source, round(offset, 3), end, words)

    def _align(
        self, aligner: ForcedAligner, segment: TextSegment, audio: np.ndarray, rate: int, offset: float, speed: float
    ) -> list[TimedWord]:
        with self._lock:
            return segment_words(aligner, segment, audio, rate, offset, speed)


def segment_words(
    aligner: ForcedAligner, segment: TextSegment, audio: np.ndarray, rate: int, offset: float = 0.0, speed: float = 1.0
) -> list[TimedWord]:
    """The client's words of a spoken segment (`audio`: mono float32 at `rate`, before any speed change), timed
    in an output where the segment begins `offset` seconds in. Blocking."""
    client = aligner.splitter.words(segment.source, segment.language)
    spoken: list[TimedWord] = []
    if aligner.splitter.words(segment.text, segment.language):  # something the aligner can time
        wave = model_wave(audio, rate).numpy()
        spoken = aligner.align_many([(wave, segment.text, segment.language, 0.0)])[0]
    return clamped(client_word_times(client, spoken), len(audio) / rate, offset, speed)


class SegmentTiming:
    """The timing of one output's segments (a request's, or a WebSocket utterance's across its clauses): each
    segment aligned in a task of its own as soon as its audio is made, its offset the audio before it."""

    def __init__(self, aligner: SpeechAligner, speed: float = 1.0):
        self.aligner = aligner
        self.speed = speed
        self.offset = 0.0  # seconds of output audio before the next segment
        self.segments = 0

    def segment_done(self, segment: TextSegment, audio: np.ndarray, rate: int) -> asyncio.Task[TimedSegment]:
        """Start timing the segment whose audio (at `rate`, before any speed change) is `audio`."""
        task = asyncio.create_task(self.aligner.time(self.segments, segment, audio, rate, self.offset, self.speed))
        self.offset += len(audio) / rate / self.speed
        self.segments += 1
        return task
