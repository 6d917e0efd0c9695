"""Model lifecycle: load on first use (once, however many callers race), warm up before ready, unload
after a stretch without work and give the memory back.

A failed load that took `QUICK_FAILURE` seconds or more is remembered for as long as it took (at most
`MAX_RETRY_DELAY`): callers meanwhile fail at once with its reason instead of each waiting for another failing
load, and the first caller after that loads again. A quicker failure (a missing or truncated file) costs little to
try again, so the next caller does. Either way a checkpoint fixed in place is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import logging
import math
import operator
import os
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from ..errors import CheckpointError, ModelUnavailableError, ModelWaitError, TTSError
from ..model.tts.prompt import SpeechInput
from ..model.tts.tts_model import Qwen3TTSModel
from ..model.tts.voice_prompt import VoicePrompt
from ..resources import release_free_memory
from .placement import use_torch_threads

log = logging.getLogger(__name__)

# The CPU priority (nice) of a load beside another loaded model. Measured (benchmarks/multi_model.py, 2 cores, a
# warm model serving without pause): the warm model's first audio p50/p95 +340/+320 ms during the load at 0,
# +17/+31 ms at 10, +8/+20 ms at 19, for loads of 0.7, 2.6 and 6 s. Live streams come first.
BESIDE_OTHERS_NICENESS = 19
QUICK_FAILURE = 1.0  # seconds: a load that fails sooner is tried again by the next caller
MAX_RETRY_DELAY = 30.0  # seconds: the longest a failed load is remembered before the next caller tries again


class ModelState(str, enum.Enum):
    UNLOADED = "unloaded"
    LOADING = "loading"
    READY = "ready"


def warm_up_model(model: Qwen3TTSModel) -> np.ndarray:
    """A two-frame synthesis and decode through every part a request will use; returns the audio. A compiled
    frame step compiles here: for one row, then for two (the compile that covers every row count above one)."""
    if model.model_type == "custom_voice":
        request = SpeechInput("Warm up.", speaker=model.speakers[0])
    elif model.model_type == "voice_design":
        request = SpeechInput("Warm up.", instruct="A neutral voice.")
    else:
        voice = VoicePrompt(
            id="warm-up",
            mode="x_vector",
            checkpoint=model.fingerprint,
            speaker_embedding=torch.zeros(model.config.talker.stack.hidden_size),
        )
        request = SpeechInput("Warm up.", voice=voice)
    started = time.perf_counter()
    result = model.generate([request], model.sampling(seed=0), max_frames=2)[0]
    if model.compiler is not None:
        model.generate([request, request], model.sampling(seed=0), max_frames=2)
        if model.compiler.enabled:
            log.info("compiled the frame step (with the warm-up) in %.1f s", time.perf_counter() - started)
    return model.decode(result.codes)


M = TypeVar("M")  # the model: a Qwen3TTSModel, a Transcriber


class ModelManager(Generic[M]):
    """Owns the model: loads it on a thread of its own (one load, however many callers wait for it, from threads
    or from the event loop), and unloads it when idle. `describe` gives the checkpoint's config without loading the
    weights (what /v1/models and the voice list need), and prepares what a load needs ahead of it."""

    def __init__(
        self,
        loader: Callable[[], M],
        idle_timeout: float = 0.0,
        warmup: Callable[[M], object] | None = warm_up_model,  # type: ignore[assignment]  # a speech model's
        describe: Callable[[], Any] | None = None,
        before_load: Callable[[], None] | None = None,
        others_loaded: Callable[[], bool] | None = None,
        config_of: Callable[[Any], Any] = operator.attrgetter("config"),
    ):
        self._loader = loader
        self._config_of = config_of  # a loaded model's config (a recogniser's is its checkpoint)
        self._before_load = before_load  # makes room for the model (a memory budget); may raise ModelWaitError
        self._others_loaded = others_loaded  # whether another model is loaded, and may be serving (the registry's)
        self._warmup = warmup
        self._describe = describe
        self.idle_timeout = idle_timeout  # seconds; 0 keeps the model loaded
        self._model: M | None = None
        self._config: Any = None  # a speech model's TTSConfig, a recogniser's AsrDescription
        self._loading: Future[M] | None = None
        self._lock = threading.Lock()
        self.state = ModelState.UNLOADED
        self.loads = 0
        self.last_error: str | None = None  # why the last load failed; None after a good one
        self._failure: str | None = None  # what callers are told while a failed load is remembered
        self._retry_at = -math.inf  # monotonic time before which a failed load is not tried again
        self.last_used = time.monotonic()
        self.on_ready: list[Callable[[], None]] = []  # called after each successful load, on the loading thread

    @classmethod
    def fixed(cls, model: M) -> ModelManager[M]:
        """A manager around an already loaded model that is never unloaded."""
        manager = cls(lambda: model, idle_timeout=0.0, warmup=None, describe=lambda: model.config)
        manager.get()
        return manager

    @property
    def loaded(self) -> M | None:
        return self._model

    @property
    def retry_in(self) -> float:
        """Seconds until a failed load may be tried again; 0 when the next caller would load."""
        return max(0.0, self._retry_at - time.monotonic())

    def known_config(self) -> Any:
        """The checkpoint's config if it has been read already (no file is read: safe on the event loop)."""
        return self._config or (self._config_of(self._model) if self._model is not None else None)

    def config(self) -> Any:
        """The checkpoint's config, read once, without loading the model or counting as use. Blocking: the first
        call reads files (call it from a worker thread)."""
        if self._config is None:
            if self._model is not None:
                self._config = self._config_of(self._model)
            elif self._describe is not None:
                self._config = self._describe()
            else:
                self._config = self._config_of(self.get())
        return self._config

    def prepare(self) -> None:
        """Read the config and prepare a load ahead (see `describe`), before a server takes requests. A checkpoint
        that cannot be read is logged and kept as `last_error` (/ready reports it); requests then get its error."""
        try:
            self.config()
        except TTSError as exc:
            self.last_error = str(exc)
            log.error("the model cannot be loaded: %s", exc)

    def get(self) -> M:
        """The model, waiting for its load if needed. Blocking: for threads, not the event loop."""
        model = self._model or self._load().result()
        self.touch()
        return model

    async def get_async(self) -> M:
        """The model; a load runs on its own thread while the event loop goes on."""
        model = self._model or await asyncio.wrap_future(self._load())
        self.touch()
        return model

    def retry_failed_load(self) -> None:
        """Load again in the background if the last load failed and its wait is over: a readiness probe's part, for
        a replica its balancer has taken out gets no request that would retry, and would stay out after a fix."""
        if self._model is None and self.last_error is not None:
            self._load()  # its failure, if any, stays in last_error

    def _load(self) -> Future[M]:
        """The load under way, a new one started, or, while a failed load is remembered, its failure."""
        with self._lock:
            wait = self.retry_in
            if self._loading is None and wait > 0:
                failed: Future[M] = Future()
                failed.set_exception(ModelUnavailableError(f"{self._failure} (the next attempt in {wait:.1f} s)"))
                return failed
            if self._loading is None:
                self._loading = Future()
                self._loading.set_running_or_notify_cancel()  # a waiter that gives up does not cancel the load
                threading.Thread(target=self._run_load, args=(self._loading,), name="model-load", daemon=True).start()
            return self._loading

    def _run_load(self, loading: Future[M]) -> None:
        self.state = ModelState.LOADING
        started = time.monotonic()
        self._take_cpu_share()
        try:
            if self._before_load is not None:
                self._before_load()
            model = self._loader()
            if self._warmup is not None:
                self._warmup(model)
            # No gc.collect(): a full collection holds the GIL, a stall for any other model serving (~190 ms where
            # start-up's objects are in its sight; the app keeps them out of it: resources.start_up_objects_kept).
            release_free_memory()  # the load's float32 and bfloat16 copies of what was quantised or cast
        except ModelWaitError as exc:  # no room yet: nothing is wrong with the model, the next caller tries again
            with self._lock:
                self.state = ModelState.UNLOADED
                self._loading = None
            log.warning("the model was not loaded: %s", exc)
            loading.set_exception(exc)
            return
        except BaseException as exc:
            failed = time.monotonic()
            took = failed - started
            # A checkpoint that cannot be read is the operator's to fix, and its message is meant for users. Anything
            # else reaches its waiters as raised (the engine logs it and answers a generic 500), and later callers
            # are not told its text.
            unreadable = isinstance(exc, CheckpointError)
            failure = f"the model cannot be loaded: {exc}" if unreadable else "loading the model failed"
            with self._lock:
                self.state = ModelState.UNLOADED
                self.last_error = str(exc) or type(exc).__name__
                self._failure = failure
                self._retry_at = failed + min(took, MAX_RETRY_DELAY) if took >= QUICK_FAILURE else -math.inf
                self._loading = None
            log.error("loading the model failed after %.2f s: %s", took, self.last_error)
            if unreadable and not isinstance(exc, ModelUnavailableError):
                unavailable = ModelUnavailableError(failure, exc.param)
                unavailable.__cause__ = exc
                exc = unavailable
            loading.set_exception(exc)
            return
        with self._lock:
            self.last_error = self._failure = None
            self._retry_at = -math.inf
            self._model, self._config = model, self._config_of(model)
            self.loads += 1
            self.state = ModelState.READY
            self._loading = None
        self.touch()
        log.info("model ready in %.2f s", time.monotonic() - started)
        for listener in self.on_ready:
            listener()
        loading.set_result(model)

    def _take_cpu_share(self) -> None:
        """Alone, a load takes every core. Beside another loaded model, which may be serving, it takes one torch
        thread (a second OpenMP pool beside that engine's slows its every step, `placement.py`) at the lowest CPU
        priority, so that its streams keep the CPU; the load then waits for spare cycles. The load's thread ends
        with it, and starts no thread that would inherit the priority (the engine's `_model_loaded`)."""
        if self._others_loaded is None or not self._others_loaded():
            use_torch_threads(len(os.sched_getaffinity(0)))
            return
        use_torch_threads(1)
        with contextlib.suppress(OSError):  # a sandbox may refuse it: then the load runs at normal priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BESIDE_OTHERS_NICENESS)

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def idle_for(self) -> float:
        return time.monotonic() - self.last_used

    def unload_if_idle(self) -> bool:
        """Unload when idle past the timeout; the caller guarantees no work is in flight."""
        if not self.idle_timeout or self._model is None or self.idle_for() < self.idle_timeout:
            return False
        if self.unload():
            log.info("model unloaded after %.0f s idle", self.idle_timeout)
            return True
        return False

    def unload(self) -> bool:
        """Unload now (whether it did); the caller guarantees no work is in flight. The memory is given back off
        the lock, so that a caller asking for the model meanwhile is not held up."""
        with self._lock:
            if self._model is None or self._loading is not None:
                return False
            model = weakref.ref(self._model)
            self._model = None
            self.state = ModelState.UNLOADED
        if model() is not None:  # kept by a reference cycle: only a full collection (it holds the GIL) frees it
            gc.collect()
        release_free_memory()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return True
