"""The engine thread: admission, continuous batching at frame boundaries, streaming chunks to asyncio.

One thread owns the model, and exists while there is work for it: it starts when the model loads or a job
arrives, and ends once it has had nothing to do for `IDLE_THREAD_LINGER` seconds (a timer then unloads an idle
model). An idle thread would keep its OpenMP pool, and beside another model's engine that pool alone slows the
other's steps (`placement.py`). Each iteration it expires cancelled and timed-out jobs,
pauses the rows whose client is `stream_buffer_seconds` of audio behind (and resumes those whose client caught
up), admits waiting jobs into free rows (interactive first; at most `max_prefills_per_step` prefills, so a joining
request holds running streams up for a bounded time), advances every other active row by one frame, and decodes
the rows whose next chunk is complete, batched by chunk length, with the incremental codec. Results reach the
event loop through `call_soon_threadsafe`; nothing here ever blocks it.

A fault fails only the requests it touched: a failed load or prefill its waiting request(s), a failed step
every active row, a failed decode the rows of that chunk group. Their rows are freed, the others go on, and
clients get a typed error while the log gets the traceback. Should the thread itself end, `failure` says why,
every request in flight fails and new ones are refused at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..config import CPU_BATCH_SIZE, GPU_BATCH_SIZE, MAX_REQUEST_FRAMES
from ..errors import (
    EngineBusyError,
    EngineOutOfMemoryError,
    EngineStoppedError,
    RequestTimeoutError,
    SynthesisFailedError,
    TTSError,
)
from ..model.tts.codec_stream import CodecStreamState
from ..model.tts.generation import FrameGenerator
from ..model.tts.tts_model import Qwen3TTSModel
from .jobs import AudioChunk, RequestClock, SpeechJob
from .model_manager import ModelManager
from .placement import pin_engine_thread

log = logging.getLogger(__name__)
_END = object()
StepListener = Callable[[float, float | None], None]
SYNTHESIS_FAILED = "synthesis failed; the server logged the details"
MAX_RETRY_AFTER = 60  # seconds: past this an estimate says little, and a client should not wait longer
IDLE_THREAD_LINGER = 2.0  # seconds an engine thread without work waits for more before it ends


def typed_error(exc: Exception, what: str) -> TTSError:
    """What a client is told about `exc`: a TTSError as it is, CUDA out of memory as such, anything else as a
    generic failure. Never its text: the log gets that, under `what`, with the traceback."""
    if isinstance(exc, TTSError):
        return exc
    log.error(what, exc_info=exc)
    if isinstance(exc, torch.OutOfMemoryError):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # give back what the failed work had reserved
        return EngineOutOfMemoryError("the GPU ran out of memory for this request; retry shortly or with shorter text")
    return SynthesisFailedError(SYNTHESIS_FAILED)


def default_batch_size() -> int:
    """Rows per decode step: 64 on a GPU, 16 on a CPU."""
    return GPU_BATCH_SIZE if torch.cuda.is_available() else CPU_BATCH_SIZE


@dataclass(eq=False)
class _Handle:
    job: SpeechJob
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    submitted: float
    clock: RequestClock
    cancelled: bool = False
    row: int | None = None
    admitted: float | None = None
    codec: CodecStreamState | None = None
    pending: list[torch.Tensor] = field(default_factory=list)
    frames_sent: int = 0
    frames_taken: int = 0  # by the client (counted on the event loop)
    paused: bool = False
    finish_reason: str | None = None

    def __post_init__(self):
        self.sizes = self.job.chunk_sizes()
        self.next_size = next(self.sizes)

    def frames_ahead(self) -> int:
        """Frames delivered that the client has not taken yet (frames still to make a chunk are not counted: a
        row never pauses on audio its client could not take)."""
        return self.frames_sent - self.frames_taken

    def deliver(self, item) -> None:
        self._call_in_loop(self.queue.put_nowait, item)

    def drop(self, error: TTSError) -> None:
        """Fail the job, discarding the audio its client has not taken: it never will."""
        self._call_in_loop(self._replace_queue, error)

    def _replace_queue(self, error: TTSError) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(error)

    def _call_in_loop(self, function, item) -> None:
        try:
            self.loop.call_soon_threadsafe(function, item)
        except RuntimeError:  # the event loop is gone; nobody is listening
            self.cancelled = True


class JobStream:
    """Async iterator over a job's audio chunks. Closing it, or cancelling the task awaiting it,
    cancels the job: the engine frees its row within one step."""

    def __init__(self, handle: _Handle, engine: Engine):
        self._handle = handle
        self._engine = engine

    def __aiter__(self) -> JobStream:
        return self

    async def __anext__(self) -> AudioChunk:
        try:
            item = await self._handle.queue.get()
        except asyncio.CancelledError:
            self._cancel()
            raise
        if item is _END:
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        self._handle.frames_taken += item.frames
        self._handle.clock.took()
        if self._handle.paused:
            self._engine.wake()
        return item

    async def aclose(self) -> None:
        self._cancel()

    def _cancel(self) -> None:
        self._handle.cancelled = True
        self._engine.wake()


class Pace:
    """The engine's recent speed, moving averages of what it measures (None until measured): seconds per step and
    frames per finished request. From them, how long a queue takes to drain."""

    SMOOTHING = 0.2  # the weight of the newest measurement

    def __init__(self) -> None:
        self.step_seconds: float | None = None
        self.frames_per_request: float | None = None

    def observe_step(self, seconds: float) -> None:
        self.step_seconds = self._average(self.step_seconds, seconds)

    def observe_request(self, frames: int) -> None:
        self.frames_per_request = self._average(self.frames_per_request, frames)

    def _average(self, average: float | None, value: float) -> float:
        return value if average is None else average + self.SMOOTHING * (value - average)

    def drain_seconds(self, waiting: int, rows: int) -> float | None:
        """Seconds until `waiting` requests have all been given one of `rows` rows, each row freeing when its
        request has made the usual number of frames; None before there is anything to go by."""
        if self.step_seconds is None or self.frames_per_request is None:
            return None
        return waiting / rows * self.frames_per_request * self.step_seconds


class Engine:
    def __init__(
        self,
        models: ModelManager | Qwen3TTSModel,
        max_batch_size: int | None = None,
        max_queue_depth: int = 64,
        max_prefills_per_step: int = 2,
        max_frames_cap: int = MAX_REQUEST_FRAMES,
        cpu_cores: set[int] | None = None,
        stream_buffer_seconds: float = 30.0,
        cuda_graphs: bool = True,
    ):
        self.models = models if isinstance(models, ModelManager) else ModelManager.fixed(models)
        self.max_batch_size = max_batch_size or default_batch_size()
        self.max_frames_cap = max_frames_cap
        self.max_queue_depth = max_queue_depth  # 0: no limit
        self.max_prefills_per_step = max_prefills_per_step
        self.cpu_cores = cpu_cores  # the engine thread's CPU cores (None: all)
        # Audio a stream may hold ahead of its client before its row pauses (0: no bound).
        self.stream_buffer_seconds = stream_buffer_seconds
        self.cuda_graphs = cuda_graphs  # replay the frame step as CUDA graphs where the model is on CUDA
        self.generator: FrameGenerator | None = None  # exists while the model is loaded
        self.longest_prefill_stall = 0.0  # seconds running streams waited for joining prefills
        self.pace = Pace()
        self.failure: str | None = None  # why the engine thread ended, if it did
        self._interactive: deque[_Handle] = deque()
        self._batch: deque[_Handle] = deque()
        self._active: dict[int, _Handle] = {}
        self._cv = threading.Condition()
        self._stopping = False
        self._accepting = False  # started (`start`): a loaded model or a job starts the thread
        self._nudged = False  # woken since the engine thread last looked (a client took audio, ...)
        self._thread: threading.Thread | None = None
        self._release: threading.Event | None = None  # set once the model asked to be unloaded is (`release`)
        self._unload_timer: threading.Timer | None = None  # unloads the idle model while no thread runs
        self._placed = False  # the engine thread's placement has been logged
        # Told after every step, on the engine thread: (step seconds, codec decode seconds or None).
        self._step_listeners: list[StepListener] = []
        self.models.on_ready.append(self._model_loaded)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, preload: bool = False) -> Engine:
        """Take work from now on; `preload` loads and warms up the model and captures the frame step's graphs
        first (else on first use). The thread starts with a loaded model or the first job."""
        with self._cv:
            self._stopping = False  # an engine stopped with its app starts again with it
            self._accepting = True
            self.failure = None
        if preload:
            self._ensure_generator(self.models.get())
        with self._cv:
            if self.models.loaded is not None or self.waiting:
                self._spawn()
        return self

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._accepting = False
            self._cancel_unload()
            self._cv.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._cv:
            self._thread = None

    @property
    def thread_alive(self) -> bool:
        return self._thread is not None

    def _model_loaded(self) -> None:
        """On the loading thread, once the model is ready: its idle unload's timer. A job waiting for the model has
        a thread already; none is started here, for it would inherit the load's CPU priority (`ModelManager`)."""
        with self._cv:
            if self._thread is None and self._unload_timer is None:
                self._arm_unload()

    def _spawn(self) -> None:
        """Start the engine thread unless it runs, the engine is not started, or it has failed (call under _cv)."""
        if self._thread is None and self._accepting and not self._stopping and self.failure is None:
            self._cancel_unload()
            self._thread = threading.Thread(target=self._run, name="tts-engine", daemon=True)
            self._thread.start()

    def _arm_unload(self) -> None:
        """With the thread ended, unload the model once it has been idle for its timeout (call under _cv)."""
        models = self.models
        if models.loaded is not None and models.idle_timeout and not self._stopping:
            delay = max(0.0, models.idle_timeout - models.idle_for())
            self._unload_timer = threading.Timer(delay, self._unload_when_idle)
            self._unload_timer.name = "tts-engine-unload"
            self._unload_timer.daemon = True
            self._unload_timer.start()

    def _unload(self) -> None:
        """Unload the model now, its frame generator first: the generator holds the model's weights, and a probe
        that sees the model unloaded must not find them held (call under _cv, with no work in flight)."""
        self.generator = None
        self.models.unload()

    def _cancel_unload(self) -> None:
        if self._unload_timer is not None:
            self._unload_timer.cancel()
            self._unload_timer = None

    def _unload_when_idle(self) -> None:
        """The timer's work, off the lock: a job that arrives meanwhile starts a thread, and either finds the model
        (its use resets the idle time, so it stays) or loads it again."""
        with self._cv:
            self._unload_timer = None
            if self._thread is not None or not self.idle or self._stopping:
                return  # the thread runs again, and unloads when the time comes
            self.generator = None  # it holds the model's weights; a thread started from here builds another
        if not self.models.unload_if_idle():
            with self._cv:
                if self._thread is None and self._unload_timer is None:
                    self._arm_unload()  # used meanwhile: its idle time starts again

    def add_step_listener(self, listener: StepListener) -> None:
        """Call `listener(step seconds, codec decode seconds or None)` after every step, on the engine thread."""
        self._step_listeners.append(listener)

    def release(self, timeout: float) -> bool:
        """Unload the model now if the engine has no work, as a memory budget makes room for another model;
        whether it did within `timeout` seconds."""
        with self._cv:
            if self.models.loaded is None or not self.idle:
                return self.models.loaded is None
            if self._thread is None:
                self._cancel_unload()
                self._unload()
                return self.models.loaded is None
            done = self._release = threading.Event()
            self._cv.notify()
        return done.wait(timeout) and self.models.loaded is None

    @property
    def idle(self) -> bool:
        """No request waits or holds a row."""
        return not (self._interactive or self._batch or self._active)

    def wake(self) -> None:
        with self._cv:
            self._nudged = True
            self._cv.notify()

    # -- the asyncio side ------------------------------------------------------------------------------

    def submit(self, job: SpeechJob, clock: RequestClock | None = None) -> JobStream:
        """Queue a job; call from the event loop. `clock` is its request's (shared by the request's segments);
        without one the job's own timeout applies. Raises EngineBusyError at once when the queue is full, and
        EngineStoppedError when the engine is stopping or has failed."""
        loop = asyncio.get_running_loop()
        clock = clock or RequestClock(job.timeout)
        handle = _Handle(job, loop, asyncio.Queue(), time.monotonic(), clock)
        with self._cv:
            if self.failure is not None:
                raise EngineStoppedError(self._stopped_message())
            if self._stopping:
                raise EngineStoppedError("the engine is shutting down")
            waiting = self._interactive if job.interactive else self._batch
            if job.continuation:
                waiting.appendleft(handle)
            elif self.max_queue_depth and self.waiting >= self.max_queue_depth:
                raise EngineBusyError(
                    f"the server is busy ({self.waiting} requests waiting); retry shortly", self.retry_after()
                )
            else:
                waiting.append(handle)
            self._spawn()
            self._cv.notify()
        return JobStream(handle, self)

    def _stopped_message(self) -> str:
        return f"{self.failure}; the server logged the details and needs a restart"

    def retry_after(self) -> int:
        """Whole seconds, 1 to MAX_RETRY_AFTER, until the requests waiting now have been given a row at the
        engine's recent pace."""
        seconds = self.pace.drain_seconds(self.waiting, self.max_batch_size) or 0.0
        return min(MAX_RETRY_AFTER, max(1, math.ceil(seconds)))

    @property
    def waiting(self) -> int:
        return len(self._interactive) + len(self._batch)

    @property
    def active(self) -> int:
        """Requests whose rows step (paused ones not counted)."""
        return sum(not handle.paused for handle in self._active.values())

    @property
    def paused(self) -> int:
        """Requests whose rows wait for their client to take the audio they hold."""
        return sum(handle.paused for handle in self._active.values())

    # -- the engine thread -----------------------------------------------------------------------------

    @property
    def model(self) -> Qwen3TTSModel | None:
        return self.models.loaded

    def _run(self) -> None:
        try:
            pin_engine_thread(self.cpu_cores, announce=not self._placed)
            self._placed = True
            with torch.inference_mode():
                if self._serve():
                    self._fail_everything(EngineStoppedError("the engine was shut down"))
        except BaseException as exc:  # past every per-request guard: nothing can be served any more
            log.critical("the engine thread stopped", exc_info=exc)
            with self._cv:  # new requests are refused from here on
                self.failure = (
                    f"the engine thread stopped: {exc}"  # a message meant for users (a bad setting, ...)
                    if isinstance(exc, TTSError)
                    else f"the engine thread stopped on an unexpected {type(exc).__name__}"
                )
            self.generator = None  # its state is suspect; a restarted engine builds a new one
            self._fail_everything(EngineStoppedError(self._stopped_message()))

    def _serve(self) -> bool:
        """Serve until the engine stops (True) or its model unloads with no work left (False: the thread ends)."""
        while True:
            self._expire()
            self._apply_backpressure()
            with self._cv:
                if self._stopping:
                    return True
                idle = not (self._interactive or self._batch or self.active)
                release, self._release = self._release, None
                if release is not None:  # a memory budget makes room for another model
                    if self.idle:
                        self._unload()
                    release.set()
                elif idle and not self._nudged and self.models.loaded is not None:
                    self._wait_idle()
                self._nudged = False
                if self.idle and (self.models.loaded is None or self.models.idle_for() >= IDLE_THREAD_LINGER):
                    self._thread = None  # the next load or job starts another
                    self._arm_unload()
                    return False
            if idle:
                continue
            running = bool(self.active)
            started = time.perf_counter()
            self._admit()
            if running:
                self.longest_prefill_stall = max(self.longest_prefill_stall, time.perf_counter() - started)
            if self.active:
                self._step()
                self.models.touch()  # activity counts per frame: a long stream is never unloaded

    def _apply_backpressure(self) -> None:
        """Pause the rows whose client has `stream_buffer_seconds` of audio yet to take, resume the others. The job
        the client listens to pauses on its own audio; a job it has not reached yet (a long text's next segment,
        made while the client takes this one) pauses on all of its request's (their RequestClock), so a client that
        stops taking audio costs no steps once the buffer is full, and one that keeps taking is never held up by
        the next segment's audio. A request whose client has taken nothing yet runs on (its audio is bounded by its
        segment)."""
        if not self.stream_buffer_seconds or self.model is None:
            return
        limit = self.stream_buffer_seconds / self.model.frames_to_seconds(1)
        now = time.monotonic()
        ahead: dict[int, int] = {}  # frames made and not taken, by request (its clock)
        listened: set[int] = set()  # requests whose client has taken some audio
        for handle in self._active.values():
            request = id(handle.clock)
            ahead[request] = ahead.get(request, 0) + handle.frames_ahead()
            if handle.frames_taken:
                listened.add(request)
        for handle in self._active.values():
            request = id(handle.clock)
            if handle.frames_taken:
                behind = handle.frames_ahead() >= limit
            else:
                behind = request in listened and ahead[request] >= limit
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

    def _wait_idle(self) -> None:
        """Sleep until work arrives (or a paused stream's client could count as stalled), or, with no row held,
        until the thread has lingered long enough to end (`_serve`) or the model has been idle for its timeout
        (then unloaded here); never ending or unloading while paused rows hold their place."""
        if self._active:
            now = time.monotonic()
            checks = [h.clock.stall_check_in(now) for h in self._active.values()]
            self._cv.wait(timeout=min((c for c in checks if c is not None), default=None))
            return
        models = self.models
        if models.idle_timeout and models.idle_for() >= models.idle_timeout:  # a timeout shorter than the linger
            self._unload()
            return
        remaining = IDLE_THREAD_LINGER - models.idle_for()
        if models.idle_timeout:
            remaining = min(remaining, models.idle_timeout - models.idle_for())
        if remaining > 0:
            self._cv.wait(timeout=remaining)

    def _expire(self) -> None:
        now = time.monotonic()
        with self._cv:
            for waiting in (self._interactive, self._batch):
                for handle in [h for h in waiting if h.cancelled or h.clock.over_time(now)]:
                    waiting.remove(handle)
                    if not handle.cancelled:
                        limit = handle.clock.timeout
                        message = f"the request waited past its {limit:g} s limit"
                        handle.deliver(RequestTimeoutError(message, context={"timeout_s": limit}))
        for handle in list(self._active.values()):
            clock = handle.clock
            if handle.cancelled:
                self._free(handle)
            elif clock.over_time(now):
                self._free(handle)
                stopped = f"the request ran past its {clock.timeout:g} s limit and was stopped"
                handle.deliver(RequestTimeoutError(stopped, context={"timeout_s": clock.timeout}))
            elif handle.paused and clock.client_stalled(now):
                self._free(handle)
                handle.drop(RequestTimeoutError(f"the client took no audio for {clock.timeout:g} s and was dropped"))

    def _next_waiting(self) -> _Handle | None:
        with self._cv:
            for waiting in (self._interactive, self._batch):
                if waiting:
                    return waiting.popleft()
        return None

    def _admit(self) -> None:
        if not (self._interactive or self._batch):
            return
        try:
            model = self.models.get()
            self._ensure_generator(model)
        except Exception as exc:  # a model that cannot load fails the requests waiting for it; the next one retries
            self._fail_waiting(typed_error(exc, "loading the model failed"))
            return
        for _ in range(min(self.max_prefills_per_step, len(self.generator.free_rows()))):
            handle = self._next_waiting()
            if handle is None:
                return
            try:
                self._prefill(model, handle)
            except Exception as exc:  # this request fails alone
                self._release_orphan_rows()
                handle.deliver(typed_error(exc, "a prefill failed"))

    def _prefill(self, model: Qwen3TTSModel, handle: _Handle) -> None:
        job = handle.job
        row, _ = model.add_row(
            self.generator, job.input, job.params, job.max_frames, job.suppress_eos, self.max_frames_cap
        )
        handle.row, handle.admitted = row, time.monotonic()
        handle.codec = model.codec_state(job.input.voice.voice)
        self._active[row] = handle

    def _release_orphan_rows(self) -> None:
        """Free the generator's rows that no request holds (a prefill that failed after taking its row)."""
        for row in self.generator.active:
            if row not in self._active:
                self.generator.remove(row)

    def _ensure_generator(self, model: Qwen3TTSModel) -> FrameGenerator:
        if self.generator is None or self.generator.talker is not model.talker:  # none yet, or an unloaded model's
            started = time.perf_counter()
            generator = FrameGenerator(model.talker, self.max_batch_size, graphs=None if self.cuda_graphs else False)
            graphs = generator.capture()
            if graphs:
                log.info("captured %d CUDA graphs of the frame step in %.2f s", graphs, time.perf_counter() - started)
            self.generator = generator
        return self.generator

    def _step(self) -> None:
        started = time.perf_counter()
        try:
            for frame in self.generator.step():
                handle = self._active[frame.row]
                handle.pending.append(frame.codes)
                handle.finish_reason = frame.finished
        except Exception as exc:  # the step's rows are all suspect: fail every one, keep serving
            self._fail_handles(list(self._active.values()), typed_error(exc, "an engine step failed"))
            return
        stepped = time.perf_counter()
        decoded = self._emit()
        done = time.perf_counter()
        decode_seconds = done - stepped if decoded else None
        self.pace.observe_step(done - started)  # a frame for every active row, decoding included
        for listener in self._step_listeners:
            try:
                listener(stepped - started, decode_seconds)
            except Exception:  # a listener's bug touches no request
                log.exception("a step listener failed")

    def _emit(self) -> bool:
        """Decode and deliver every chunk that is due; whether there was any."""
        ready: dict[int, list[_Handle]] = {}
        for handle in self._active.values():
            if len(handle.pending) >= handle.next_size or (handle.finish_reason and handle.pending):
                ready.setdefault(len(handle.pending), []).append(handle)
        for handles in ready.values():
            try:
                codes = torch.stack([torch.stack(h.pending) for h in handles])
                audio = self.model.codec_stream.decode([h.codec for h in handles], codes).float().cpu().numpy()
            except Exception as exc:  # only this group's streams are lost
                self._fail_handles(handles, typed_error(exc, "a codec decode failed"))
                continue
            self._deliver(handles, audio, codes.cpu().numpy())
        return bool(ready)

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
            handle.pending = []
            handle.next_size = next(handle.sizes)
            if handle.finish_reason:
                handle.deliver(_END)
                del self._active[handle.row]
                self.pace.observe_request(handle.frames_sent)

    def _fail_handles(self, handles: list[_Handle], error: TTSError) -> None:
        """Fail these active requests and free their rows."""
        for handle in handles:
            self._free(handle)
            handle.deliver(error)

    def _free(self, handle: _Handle) -> None:
        if handle.paused:
            self._resume(handle, time.monotonic())
        self.generator.remove(handle.row)
        del self._active[handle.row]

    def _fail_waiting(self, error: TTSError) -> None:
        with self._cv:
            waiting = list(self._interactive) + list(self._batch)
            self._interactive.clear()
            self._batch.clear()
        for handle in waiting:
            handle.deliver(error)

    def _fail_everything(self, error: TTSError) -> None:
        self._fail_waiting(error)
        for handle in list(self._active.values()):
            handle.deliver(error)
            if self.generator is not None:
                self.generator.remove(handle.row)
        self._active.clear()
