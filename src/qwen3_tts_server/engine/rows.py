"""What every engine shares, synthesis (`synthesis.py`) and recognition (`recognition.py`) alike: one thread that owns
a model and serves requests in the rows of a batch, continuously (rows join and leave between steps).

The thread exists while there is work for it: it starts when the model loads or a job arrives, and ends once it has
had nothing to do for `IDLE_THREAD_LINGER` seconds, handing the memory its requests freed back to the system (a
timer then unloads an idle model). An idle thread would keep its OpenMP pool, and beside another model's engine
that pool alone slows the other's steps (`placement.py`).
Each iteration it expires cancelled and timed-out jobs, admits waiting jobs into free rows (interactive first; at
most `max_prefills_per_step` of them, or fewer as `_admission_quota` says, so joining requests hold running rows up
for a bounded time; `_prefill_many` may prefill them together), and steps the running rows. Results reach the event
loop through `call_soon_threadsafe`; nothing here ever blocks it.

A fault fails only the requests it touched: a failed load or prefill its waiting request(s), a failed step every
active row. Their rows are freed, the others go on, and clients get a typed error while the log gets the
traceback. Should the thread itself end, `failure` says why, every request in flight fails and new ones are
refused at once. A subclass says what a row is: `_ensure_runner`, `_free_row_count`, `_prefill`, `_step`,
`_remove_row`, `_drop_runner` and the rest of its abstract methods.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import torch

from ..errors import (
    EngineBusyError,
    EngineOutOfMemoryError,
    EngineStoppedError,
    RequestTimeoutError,
    TTSError,
)
from ..resources import release_free_memory
from .jobs import RequestClock
from .model_manager import ModelManager
from .placement import pin_engine_thread

log = logging.getLogger(__name__)
END = object()  # a job's stream ends
StepListener = Callable[[float, float | None], None]
MAX_RETRY_AFTER = 60  # seconds: past this an estimate says little, and a client should not wait longer
IDLE_THREAD_LINGER = 2.0  # seconds an engine thread without work waits for more before it ends


class Job(Protocol):
    @property
    def interactive(self) -> bool: ...  # admitted before whole-file jobs

    @property
    def continuation(self) -> bool: ...  # a later part of a request under way: never refused, admitted first

    @property
    def timeout(self) -> float | None: ...  # seconds from submission, without a RequestClock


def typed_error(exc: Exception, what: str, failed: Callable[[], TTSError]) -> TTSError:
    """What a client is told about `exc`: a TTSError as it is, CUDA out of memory as such, anything else as
    `failed()`, a generic failure. Never its text: the log gets that, under `what`, with the traceback."""
    if isinstance(exc, TTSError):
        return exc
    log.error(what, exc_info=exc)
    if isinstance(exc, torch.OutOfMemoryError):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # give back what the failed work had reserved
        return EngineOutOfMemoryError("the GPU ran out of memory for this request; retry shortly or with less input")
    return failed()


J = TypeVar("J", bound=Job)


@dataclass(eq=False)
class RowHandle(Generic[J]):
    """A submitted job, its client's queue, and the row it holds once admitted."""

    job: J
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    submitted: float
    clock: RequestClock
    cancelled: bool = False
    row: int | None = None
    admitted: float | None = None
    paused: bool = False  # held for its client (synthesis' backpressure)

    def deliver(self, item) -> None:
        self._call_in_loop(self.queue.put_nowait, item)

    def drop(self, error: TTSError) -> None:
        """Fail the job, discarding what its client has not taken: it never will."""
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


H = TypeVar("H", bound=RowHandle)


class RowStream(Generic[H]):
    """Async iterator over what a job's row yields. Closing it, or cancelling the task awaiting it, cancels the
    job: the engine frees its row within one step."""

    def __init__(self, handle: H, engine: RowEngine):
        self._handle = handle
        self._engine = engine

    def __aiter__(self):
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._handle.queue.get()
        except asyncio.CancelledError:
            self.cancel()
            raise
        if item is END:
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        self._handle.clock.took()
        self._took(item)
        return item

    def _took(self, item) -> None:
        """The client took `item` (on the event loop)."""

    async def aclose(self) -> None:
        self.cancel()

    def cancel(self) -> None:
        """Cancel the job (from the event loop): its row is freed within one step."""
        self._handle.cancelled = True
        self._engine.wake()


class Pace:
    """The engine's recent speed, moving averages of what it measures (None until measured): seconds per step,
    steps per finished request and seconds per prompt prefilled. From them, how long a queue takes to drain."""

    SMOOTHING = 0.2  # the weight of the newest measurement

    def __init__(self) -> None:
        self.step_seconds: float | None = None
        self.steps_per_request: float | None = None
        self.prompt_seconds: float | None = None  # per prompt of a prefill that took several together

    def observe_step(self, seconds: float) -> None:
        self.step_seconds = self._average(self.step_seconds, seconds)

    def observe_prompts(self, seconds: float, prompts: int) -> None:
        self.prompt_seconds = self._average(self.prompt_seconds, seconds / prompts)

    def observe_request(self, steps: int) -> None:
        self.steps_per_request = self._average(self.steps_per_request, steps)

    def _average(self, average: float | None, value: float) -> float:
        return value if average is None else average + self.SMOOTHING * (value - average)

    def drain_seconds(self, waiting: int, rows: int) -> float | None:
        """Seconds until `waiting` requests have all been given one of `rows` rows, each row freeing when its
        request has taken the usual number of steps; None before there is anything to go by."""
        if self.step_seconds is None or self.steps_per_request is None:
            return None
        return waiting / rows * self.steps_per_request * self.step_seconds


class RowEngine(ABC, Generic[J, H]):
    thread_name = "engine"
    timeout_error: type[RequestTimeoutError] = RequestTimeoutError  # what a request past its time limit gets

    def __init__(
        self,
        models: ModelManager,
        max_batch_size: int,
        max_queue_depth: int = 64,
        max_prefills_per_step: int = 2,
        cpu_cores: set[int] | None = None,
    ):
        self.models = models
        self.max_batch_size = max_batch_size
        self.max_queue_depth = max_queue_depth  # 0: no limit
        self.max_prefills_per_step = max_prefills_per_step
        self.cpu_cores = cpu_cores  # the engine thread's CPU cores (None: all)
        self.longest_prefill_stall = 0.0  # seconds running rows waited for joining prefills
        self.pace = Pace()
        self.failure: str | None = None  # why the engine thread ended, if it did
        self._interactive: deque[H] = deque()
        self._batch: deque[H] = deque()
        self._active: dict[int, H] = {}
        self._cv = threading.Condition()
        self._stopping = False
        self._accepting = False  # started (`start`): a loaded model or a job starts the thread
        self._nudged = False  # woken since the engine thread last looked (a client took audio, ...)
        self._thread: threading.Thread | None = None  # the thread serving; None once it has stopped taking work
        self._last_thread: threading.Thread | None = None  # the latest thread, which may still be ending
        self._release: threading.Event | None = None  # set once the model asked to be unloaded is (`release`)
        self._unload_timer: threading.Timer | None = None  # unloads the idle model while no thread runs
        self._placed = False  # the engine thread's placement has been logged
        # Told after every step, on the engine thread: (step seconds, the part of it spent decoding, or None).
        self._step_listeners: list[StepListener] = []
        self.models.on_ready.append(self._model_loaded)

    # -- what a row is (the subclass) --------------------------------------------------------------------------

    @abstractmethod
    def _failed(self) -> TTSError:
        """The generic error a client gets for an unexpected fault."""

    @abstractmethod
    def _ensure_runner(self, model) -> None:
        """Build what steps the rows for `model` unless it is built for it already."""

    @abstractmethod
    def _drop_runner(self) -> None:
        """Let go of what steps the rows (it holds the model's weights)."""

    @abstractmethod
    def _runner_built(self) -> bool:
        """Whether the runner exists (while the model is loaded)."""

    @abstractmethod
    def _free_row_count(self) -> int:
        """Rows a waiting job could take now."""

    @abstractmethod
    def _prefill(self, model, handle: H) -> None:
        """Give `handle` a row (its `row`, its `admitted`, and `_active[row]`)."""

    @abstractmethod
    def _step(self) -> None:
        """Advance every active row by one step and deliver what is due."""

    @abstractmethod
    def _remove_row(self, row: int) -> None:
        """Free a row (a finished, cancelled or failed job's)."""

    @abstractmethod
    def _rows_held(self) -> list[int]:
        """The rows the runner holds (to free those a failed prefill left behind)."""

    def _apply_backpressure(self) -> None:
        """Pause or resume rows for their clients; none by default."""

    def _stream(self, handle: H) -> RowStream:
        return RowStream(handle, self)

    @abstractmethod
    def _handle(self, job: J, loop: asyncio.AbstractEventLoop, clock: RequestClock) -> H:
        """A submitted job's handle (the subclass's own, with what its rows keep)."""

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self, preload: bool = False) -> RowEngine:
        """Take work from now on; `preload` loads and warms up the model and builds its runner first (else on first
        use). The thread starts with a loaded model or the first job."""
        with self._cv:
            self._stopping = False  # an engine stopped with its app starts again with it
            self._accepting = True
            self.failure = None
        if preload:
            self._ensure_runner(self.models.get())
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
        """Whether an engine thread exists: serving, or done with its work and not yet ended."""
        last = self._last_thread
        return self._thread is not None or (last is not None and last.is_alive())

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
            self._thread = self._last_thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def _arm_unload(self) -> None:
        """With the thread ended, unload the model once it has been idle for its timeout (call under _cv)."""
        models = self.models
        if models.loaded is not None and models.idle_timeout and not self._stopping:
            delay = max(0.0, models.idle_timeout - models.idle_for())
            self._unload_timer = threading.Timer(delay, self._unload_when_idle)
            self._unload_timer.name = f"{self.thread_name}-unload"
            self._unload_timer.daemon = True
            self._unload_timer.start()

    def _unload(self) -> None:
        """Unload the model now, its runner first: the runner holds the model's weights, and a probe that sees the
        model unloaded must not find them held (call under _cv, with no work in flight)."""
        self._drop_runner()
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
            self._drop_runner()  # it holds the model's weights; a thread started from here builds another
        if not self.models.unload_if_idle():
            with self._cv:
                if self._thread is None and self._unload_timer is None:
                    self._arm_unload()  # used meanwhile: its idle time starts again

    def add_step_listener(self, listener: StepListener) -> None:
        """Call `listener(step seconds, decoding seconds or None)` after every step, on the engine thread."""
        self._step_listeners.append(listener)

    def _tell_listeners(self, step_seconds: float, decode_seconds: float | None) -> None:
        for listener in self._step_listeners:
            try:
                listener(step_seconds, decode_seconds)
            except Exception:  # a listener's bug touches no request
                log.exception("a step listener failed")

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

    # -- the asyncio side --------------------------------------------------------------------------------------

    def submit(self, job: J, clock: RequestClock | None = None) -> RowStream:
        """Queue a job; call from the event loop. `clock` is its request's (shared by the request's jobs); without
        one the job's own timeout applies. Raises EngineBusyError at once when the queue is full, and
        EngineStoppedError when the engine is stopping or has failed."""
        (stream,) = self.submit_in_order([job], clock or RequestClock(job.timeout))
        return stream

    def submit_in_order(self, jobs: Sequence[J], clock: RequestClock) -> list[RowStream]:
        """Queue one request's jobs together, in order, behind those waiting (ahead of them if the first is a
        continuation): a full queue refuses the request whole or takes it whole. As `submit` otherwise."""
        loop = asyncio.get_running_loop()
        handles = [self._handle(job, loop, clock) for job in jobs]
        with self._cv:
            if self.failure is not None:
                raise EngineStoppedError(self._stopped_message())
            if self._stopping:
                raise EngineStoppedError("the engine is shutting down")
            first = jobs[0]
            waiting = self._interactive if first.interactive else self._batch
            if first.continuation:
                waiting.extendleft(reversed(handles))
            elif self.max_queue_depth and self.waiting >= self.max_queue_depth:
                raise EngineBusyError(
                    f"the server is busy ({self.waiting} requests waiting); retry shortly", self.retry_after()
                )
            else:
                waiting.extend(handles)
            self._spawn()
            self._cv.notify()
        return [self._stream(handle) for handle in handles]

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
        """Requests whose rows wait for their client to take what they hold."""
        return sum(handle.paused for handle in self._active.values())

    @property
    def rows_held(self) -> int:
        """Rows the runner holds (a leak would hold more than `active` + `paused`); 0 before it is built."""
        return len(self._rows_held()) if self._runner_built() else 0

    # -- the engine thread -------------------------------------------------------------------------------------

    @property
    def model(self):
        return self.models.loaded

    def _run(self) -> None:
        try:
            pin_engine_thread(self.cpu_cores, announce=not self._placed)
            self._placed = True
            with torch.inference_mode():
                if self._serve():
                    self._fail_everything(EngineStoppedError("the engine was shut down"))
                    return
            # Idle: what the finished requests freed goes back to the system, rather than staying resident in the
            # allocator's arenas until the next burst (a step that reuses it then takes it again).
            release_free_memory()
        except BaseException as exc:  # past every per-request guard: nothing can be served any more
            log.critical("the engine thread stopped", exc_info=exc)
            with self._cv:  # new requests are refused from here on
                self.failure = (
                    f"the engine thread stopped: {exc}"  # a message meant for users (a bad setting, ...)
                    if isinstance(exc, TTSError)
                    else f"the engine thread stopped on an unexpected {type(exc).__name__}"
                )
            self._drop_runner()  # its state is suspect; a restarted engine builds a new one
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
                self.models.touch()  # activity counts per step: a long request is never unloaded

    def _wait_idle(self) -> None:
        """Sleep until work arrives (or a paused row's client could count as stalled), or, with no row held, until
        the thread has lingered long enough to end (`_serve`) or the model has been idle for its timeout (then
        unloaded here); never ending or unloading while paused rows hold their place."""
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
                        handle.deliver(self.timeout_error(message, context={"timeout_s": limit}))
        for handle in list(self._active.values()):
            clock = handle.clock
            if handle.cancelled:
                self._free(handle)
            elif clock.over_time(now):
                self._free(handle)
                stopped = f"the request ran past its {clock.timeout:g} s limit and was stopped"
                handle.deliver(self.timeout_error(stopped, context={"timeout_s": clock.timeout}))
            elif handle.paused and clock.client_stalled(now):
                self._free(handle)
                handle.drop(self.timeout_error(f"the client took no audio for {clock.timeout:g} s and was dropped"))

    def _next_waiting(self) -> H | None:
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
            self._ensure_runner(model)
        except Exception as exc:  # a model that cannot load fails the requests waiting for it; the next one retries
            self._fail_waiting(self._typed(exc, "loading the model failed"))
            return
        handles: list[H] = []
        for _ in range(min(self._admission_quota(), self._free_row_count())):
            handle = self._next_waiting()
            if handle is None:
                break
            handles.append(handle)
        if handles:
            self._prefill_many(model, handles)

    def _admission_quota(self) -> int:
        """How many waiting jobs this step may admit: `max_prefills_per_step`."""
        return self.max_prefills_per_step

    def _prefill_many(self, model, handles: list[H]) -> None:
        """Give each of `handles` a row, one prefill at a time; a request whose prefill fails fails alone."""
        for handle in handles:
            try:
                self._prefill(model, handle)
            except Exception as exc:  # this request fails alone
                self._release_orphan_rows()
                handle.deliver(self._typed(exc, "a prefill failed"))

    def _prefill_together(self, model, handles: list[H], together: Callable[[], None]) -> bool:
        """Run `together`, a prefill of `handles` at once; should it fail, the rows it took are freed and each is
        prefilled alone (`_prefill_many`), so that a request that cannot be prefilled fails alone. Whether it ran."""
        try:
            together()
        except Exception as exc:
            for handle in handles:  # admitted before it failed
                if handle.row is not None:
                    self._active.pop(handle.row, None)
                    handle.row = None
            self._release_orphan_rows()
            if len(handles) == 1:
                handles[0].deliver(self._typed(exc, "a prefill failed"))
            else:
                log.info("a prefill of %d requests together failed; prefilling them one by one", len(handles))
                RowEngine._prefill_many(self, model, handles)
            return False
        return True

    def _typed(self, exc: Exception, what: str) -> TTSError:
        return typed_error(exc, what, self._failed)

    def _release_orphan_rows(self) -> None:
        """Free the runner's rows that no request holds (a prefill that failed after taking its row)."""
        for row in self._rows_held():
            if row not in self._active:
                self._remove_row(row)

    def _fail_handles(self, handles: list[H], error: TTSError) -> None:
        """Fail these active requests and free their rows."""
        for handle in handles:
            self._free(handle)
            handle.deliver(error)

    def _free(self, handle: H) -> None:
        self._remove_row(handle.row)
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
            if self._runner_built():
                self._remove_row(handle.row)
        self._active.clear()
