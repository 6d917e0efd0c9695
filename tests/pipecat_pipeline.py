"""Pipecat pipelines for the tests of its services against a live server: the service, then a collector of the
frames it sends on, run by Pipecat's own worker runner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

TIMEOUT = 120


class Collected(FrameProcessor):
    """The end of a pipeline: keeps every frame of `kinds`, and is `done` once a frame of `until` passed."""

    def __init__(self, kinds: tuple[type, ...], until: type):
        super().__init__()
        self.kinds, self.until = kinds, until
        self.frames: list[Frame] = []
        self.done = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, self.kinds):
            self.frames.append(frame)
        if isinstance(frame, self.until):
            self.done.set()
        await self.push_frame(frame, direction)


@asynccontextmanager
async def running(service: FrameProcessor, collected: Collected, **params) -> AsyncIterator[PipelineWorker]:
    """The pipeline of `service` and `collected` (`params`: its PipelineParams) running; the caller queues frames.
    On leaving, once `collected` is done, the pipeline ends."""
    worker = PipelineWorker(
        Pipeline([service, collected]), params=PipelineParams(**params), cancel_on_idle_timeout=False
    )
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    try:
        yield worker
        await asyncio.wait_for(collected.done.wait(), TIMEOUT)
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, TIMEOUT)


async def heard(service: FrameProcessor, audio: bytes, rate: int) -> list[Frame]:
    """An STT `service` fed 16-bit mono `audio` in 100 ms frames, then the user's stop (Pipecat's voice activity):
    its interim and final transcription frames, until the first final."""
    collected = Collected((TranscriptionFrame, InterimTranscriptionFrame), until=TranscriptionFrame)
    async with running(service, collected, audio_in_sample_rate=rate) as worker:
        step = rate // 10 * 2
        for start in range(0, len(audio), step):
            await worker.queue_frame(InputAudioRawFrame(audio[start : start + step], rate, 1))
        await worker.queue_frame(VADUserStoppedSpeakingFrame())
    return collected.frames
