"""The synthesis engine: continuous batching of speech frames (`rows.py`: the thread, admission, expiry, faults),
streaming audio chunks to asyncio.

Each iteration, besides what every engine does, it pauses the rows whose listener is `stream_buffer_seconds` of audio
behind (and resumes those whose listener caught up), advances every other active row by one frame, and decodes the
rows whose next chunk is complete with the incremental codec (on a GPU in one decode, whatever their lengths; on a CPU
one stream after another, the listener with the least audio first). A failed decode fails the rows of that decode
only.

Two schedulers. `deadline` (the default) prefills the waiting requests it admits together, in one forward (a step's
worth, or more while every listener can wait), and lets rows whose listeners hold plenty of audio skip steps while
others are about to run dry or wait for their first audio (`deadlines.py`). `fixed` is the policy before it: one prefill
after another, `max_prefills_per_step` of them, every row stepping every step (kept to measure against).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from ..config import CPU_BATCH_SIZE, GPU_BATCH_SIZE, MAX_REQUEST_FRAMES
from ..errors import SynthesisFailedError, TTSError
from ..model.tts.codec_stream import CodecStreamState
from ..model.tts.generation import FrameGenerator
from ..model.tts.tts_model import Qwen3TTSModel
from . import rows
from .deadlines import Listener, Outlook, admission_quota, rows_to_hold
from .jobs import AudioChunk, RequestClock, SpeechJob
from .model_manager import ModelManager
from .rows import END, MAX_RETRY_AFTER, RowEngine, RowHandle, RowStream

__all__ = ["MAX_RETRY_AFTER", "SCHEDULERS", "SYNTHESIS_FAILED", "Engine", "JobStream", "typed_error"]
log = logging.getLogger(__name__)
SYNTHESIS_FAILED = "synthesis failed; the server logged the details"
SCHEDULERS = ("deadline", "fixed")


def typed_error(exc: Exception, what: str) -> TTSError:
    """What a synthesis client is told about `exc` (`rows.typed_error`): a generic failure is SynthesisFailedError."""
    return rows.typed_error(exc, what, lambda: SynthesisFailedError(SYNTHESIS_FAILED))


def default_batch_size() -> int:
    """Rows per decode step: 64 on a GPU, 16 on a CPU."""
    return GPU_BATCH_SIZE if torch.cuda.is_available() else CPU_BATCH_SIZE


@dataclass(eq=False)
class _Handle(RowHandle[SpeechJob]):
    codec: CodecStreamState | None = None
    pending: list[torch.Tensor] = field(default_factory=list)
    frames_sent: int = 0
    frames_taken: int = 0  # by the client (counted on the event loop)
    finish_reason: str | None = None
    listener: Listener = field(default_factory=Listener)  # its request's (`Engine._handle`)
    held: bool = False  # skipped the last step for rows more urgent (the deadline scheduler)
    order: int = 0  # when it was submitted, among all jobs: its listener hears its jobs in this order

    def __post_init__(self):
        self.sizes = self.job.chunk_sizes()
        self.next_size = next(self.sizes)

    def frames_ahead(self) -> int:
        """Frames delivered that the client has not taken yet (frames still to make a chunk are not counted: a
        row never pauses on audio its client could not take)."""
        return self.frames_sent - self.frames_taken


class JobStream(RowStream[_Handle]):
    """Async iterator over a job's audio chunks. Closing it, or cancelling the task awaiting it,
    cancels the job: the engine frees its row within one step."""

    async def __anext__(self) -> AudioChunk:
        return await super().__anext__()

    def _took(self, item: AudioChunk) -> None:
        self._handle.frames_taken += item.frames
        self._engine.wake()  # a row of this listener's, this job's or a later one, may resume


class Engine(RowEngine[SpeechJob, _Handle]):
    thread_name = "tts-engine"

    def __init__(
        self,
        models: ModelManager | Qwen3TTSModel,
        max_batch_size: int | None = None,
        max_queue_depth: int = 64,
        max_prefills_per_step: int = 32,
        max_frames_cap: int = MAX_REQUEST_FRAMES,
        cpu_cores: set[int] | None = None,
        stream_buffer_seconds: float = 30.0,
        cuda_graphs: bool = True,
        scheduler: str = "deadline",
        fused_kernels: str = "auto",
    ):
        if scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
        super().__init__(
            models if isinstance(models, ModelManager) else ModelManager.fixed(models),
            max_batch_size or default_batch_size(),
            max_queue_depth,
            max_prefills_per_step,
            cpu_cores,
        )
        self.max_frames_cap = max_frames_cap
        # Audio a stream may hold ahead of its client before its row pauses (0: no bound).
        self.stream_buffer_seconds = stream_buffer_seconds
        self.cuda_graphs = cuda_graphs  # replay the frame step as CUDA graphs where the model is on CUDA
        self.scheduler = scheduler
        self.fused_kernels = fused_kernels  # "auto": the code predictor's fused kernels where they can run; "off"
        self.generator: FrameGenerator | None = None  # exists while the model is loaded
        self._listeners: weakref.WeakKeyDictionary[RequestClock, Listener] = weakref.WeakKeyDictionary()
        self._submitted = itertools.count()
        self._unheard: list[_Handle] = []  # finished jobs whose audio their client has not all taken yet

    def start(self, preload: bool = False) -> Engine:
        """Take work from now on; `preload` loads and warms up the model and captures the frame step's graphs
        first (else on first use). The thread starts with a loaded model or the first job."""
        super().start(preload)
        return self

    def submit(self, job: SpeechJob, clock: RequestClock | None = None) -> JobStream:
        """Queue a job; call from the event loop (`RowEngine.submit`)."""
        stream = super().submit(job, clock)
        assert isinstance(stream, JobStream)
        return stream

    @property
    def model(self) -> Qwen3TTSModel | None:
        return self.models.loaded

    # -- what a row is -----------------------------------------------------------------------------------------

    def _failed(self) -> TTSError:
        return SynthesisFailedError(SYNTHESIS_FAILED)

    def _handle(self, job: SpeechJob, loop: asyncio.AbstractEventLoop, clock: RequestClock) -> _Handle:
        handle = _Handle(job, loop, asyncio.Queue(), time.monotonic(), clock, order=next(self._submitted))
        handle.listener = self._listeners.setdefault(clock, Listener())  # one per request: its segments play in turn
        return handle

    def _stream(self, handle: _Handle) -> JobStream:
        return JobStream(handle, self)

    def _ensure_runner(self, model: Qwen3TTSModel) -> None:
        self._ensure_generator(model)

    def _drop_runner(self) -> None:
        self.generator = None

    def _runner_built(self) -> bool:
        return self.generator is not None

    def _free_row_count(self) -> int:
        return len(self.generator.free_rows())

    def _rows_held(self) -> list[int]:
        return list(self.generator.active)

    def _remove_row(self, row: int) -> None:
        self.generator.remove(row)

    def _free(self, handle: _Handle) -> None:
        if handle.paused:
            self._resume(handle, time.monotonic())
        super()._free(handle)

    def _apply_backpressure(self) -> None:
        """Pause the rows whose listener would hold `stream_buffer_seconds` of audio by the time it reached them,
        resume the others. A listener (an `Audience`: a request's, or a WebSocket session's) hears its jobs one
        after another: a job pauses once the audio made and not yet taken of itself and of the jobs heard before it
        (finished ones whose audio still waits included) reaches the buffer. So the next segment may start early,
        but only within the same buffer; a client that stops taking audio costs no steps once it is full, however
        many segments its text has; and the job being heard never waits on the audio of those after it."""
        if not self.stream_buffer_seconds or self.model is None:
            return
        limit = self.stream_buffer_seconds / self.model.frames_to_seconds(1)
        now = time.monotonic()
        self._unheard = [h for h in self._unheard if not h.cancelled and h.frames_ahead()]
        by_listener: dict[int, list[_Handle]] = {}
        for handle in [*self._unheard, *self._active.values()]:
            by_listener.setdefault(id(handle.clock.audience), []).append(handle)
        for handles in by_listener.values():
            ahead = 0
            for handle in sorted(handles, key=lambda h: h.order):
                ahead += handle.frames_ahead()
                if self._active.get(handle.row) is not handle:  # finished: its audio only waits
                    continue
                behind = ahead >= limit
                if behind and not handle.paused:
                    handle.paused = True
                    self.generator.pause(handle.row)
                    handle.clock.pause(now)
                elif handle.paused and not behind:
                    self._resume(handle, now)

    def _resume(self, handle: _Handle, now: float) -> None:
        handle.paused = False
        self.generator.resume(handle.row)
        handle.clock.resume(now)

    def _prefill(self, model: Qwen3TTSModel, handle: _Handle) -> None:
        self._prefill_at_once(model, [handle])

    def _prefill_at_once(self, model: Qwen3TTSModel, handles: list[_Handle]) -> None:
        """Give every one of `handles` a row in one forward."""
        asked = [
            model.row_request(h.job.input, h.job.params, h.job.max_frames, h.job.suppress_eos, self.max_frames_cap)
            for h in handles
        ]
        now = time.monotonic()
        for handle, row in zip(handles, self.generator.add_many(asked), strict=True):
            handle.row, handle.admitted = row, now
            handle.codec = model.codec_state(handle.job.input.voice.voice)
            self._active[row] = handle

    def _prefill_many(self, model: Qwen3TTSModel, handles: list[_Handle]) -> None:
        """The deadline scheduler prefills the admitted requests together; should that fail, one at a time, so a
        request that cannot be prefilled fails alone."""
        if self.scheduler == "fixed":
            super()._prefill_many(model, handles)
            return
        started = time.perf_counter()
        if self._prefill_together(model, handles, lambda: self._prefill_at_once(model, handles)):
            self.pace.observe_prompts(time.perf_counter() - started, len(handles))

    def _outlooks(self) -> list[Outlook]:
        """The stepping rows as the deadline scheduler sees them."""
        now, step = time.monotonic(), self.pace.step_seconds or 0.0
        return [
            Outlook(row, h.job.interactive, h.listener.holds(now), max(h.next_size - len(h.pending), 0) * step, h.held)
            for row, h in self._active.items()
            if not h.paused
        ]

    def _admission_quota(self) -> int:
        if self.scheduler == "fixed":
            return self.max_prefills_per_step
        return admission_quota(
            self.max_prefills_per_step, self._outlooks(), self.pace.prompt_seconds, self.pace.step_seconds or 0.0
        )

    def _ensure_generator(self, model: Qwen3TTSModel) -> FrameGenerator:
        if self.generator is None or self.generator.talker is not model.talker:  # none yet, or an unloaded model's
            started = time.perf_counter()
            generator = FrameGenerator(
                model.talker,
                self.max_batch_size,
                graphs=None if self.cuda_graphs else False,
                fused=None if self.fused_kernels == "auto" else False,
                traces=model.predictor_traces,
            )
            graphs = generator.capture()
            if graphs:
                log.info("captured %d CUDA graphs of the frame step in %.2f s", graphs, time.perf_counter() - started)
            self.generator = generator
        return self.generator

    def _step(self) -> None:
        started = time.perf_counter()
        held = rows_to_hold(self._outlooks()) if self.scheduler == "deadline" else set()
        for row, handle in self._active.items():
            handle.held = row in held
        for row in held:
            self.generator.pause(row)
        try:
            for frame in self.generator.step():
                handle = self._active[frame.row]
                handle.pending.append(frame.codes)
                handle.finish_reason = frame.finished
        except Exception as exc:  # the step's rows are all suspect: fail every one, keep serving
            self._fail_handles(list(self._active.values()), typed_error(exc, "an engine step failed"))
            return
        finally:
            for row in held:
                if row in self.generator.paused:
                    self.generator.resume(row)
        stepped = time.perf_counter()
        decoded = self._emit()
        done = time.perf_counter()
        self.pace.observe_step(done - started)  # a frame for every active row, decoding included
        self._tell_listeners(stepped - started, done - stepped if decoded else None)

    def _emit(self) -> bool:
        """Decode and deliver every chunk that is due; whether there was any."""
        ready = [
            handle
            for handle in self._active.values()
            if len(handle.pending) >= handle.next_size or (handle.finish_reason and handle.pending)
        ]
        for handles in self._decode_groups(ready):
            try:
                chunks = [torch.stack(h.pending) for h in handles]
                audio = self.model.codec_stream.decode_ragged([h.codec for h in handles], chunks)
                samples = torch.cat(audio).float().cpu().numpy()  # one copy to the host for the whole group
                codes = torch.cat(chunks).cpu().numpy()
            except Exception as exc:  # only this group's streams are lost
                self._fail_handles(handles, typed_error(exc, "a codec decode failed"))
                continue
            ends = list(itertools.accumulate(len(chunk) for chunk in chunks))[:-1]
            per_frame = self.model.samples_per_frame
            self._deliver(handles, np.split(samples, [end * per_frame for end in ends]), np.split(codes, ends))
        return bool(ready)

    def _decode_groups(self, ready: list[_Handle]) -> list[list[_Handle]]:
        """The chunks due, in the decodes that make them. The fixed scheduler: one decode per chunk length. The
        deadline scheduler: on a GPU one decode for them all, whatever their lengths
        (`StreamingCodecDecoder.decode_ragged`); on a CPU, where the codec decodes each stream alone anyway (a
        stream's bits must not depend on the others), each chunk is delivered as soon as it is made, the listeners
        with the least audio first (no audio yet before any)."""
        if self.scheduler == "fixed":
            by_length: dict[int, list[_Handle]] = {}
            for handle in ready:
                by_length.setdefault(len(handle.pending), []).append(handle)
            return list(by_length.values())
        if self.model.device.type != "cpu":
            return [ready] if ready else []
        now = time.monotonic()
        held = {id(handle): handle.listener.holds(now) for handle in ready}
        ready.sort(key=lambda handle: -math.inf if held[id(handle)] is None else held[id(handle)])
        return [[handle] for handle in ready]

    def _deliver(self, handles: list[_Handle], audio, codes) -> None:
        now = time.monotonic()
        for handle, samples, chunk_codes in zip(handles, audio, codes, strict=True):
            handle.deliver(
                AudioChunk(
                    audio=samples,
                    codes=chunk_codes,
                    first_frame=handle.frames_sent,
                    queue_seconds=handle.admitted - handle.submitted,
                    elapsed_seconds=now - handle.submitted,
                    finish_reason=handle.finish_reason,
                )
            )
            handle.frames_sent += len(chunk_codes)
            handle.listener.delivered(len(samples) / self.model.sample_rate, now)
            handle.pending = []
            handle.next_size = next(handle.sizes)
            if handle.finish_reason:
                handle.deliver(END)
                del self._active[handle.row]
                if self.stream_buffer_seconds:
                    self._unheard.append(handle)
                self.pace.observe_request(handle.frames_sent)
