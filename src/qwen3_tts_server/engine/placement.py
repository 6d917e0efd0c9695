"""Where the engine thread runs on the CPU: INFERENCE_CPU_CORES pins it (the earlier server's setting) and torch's
intra-op threads follow the cores it has, so its OpenMP pool never outnumbers them.

The engine thread must also be the only one with a pool of several threads. OpenMP keeps a pool per thread that
ran parallel work, for as long as that thread lives; once the pools hold more threads than there are cores, the
OpenMP runtime stops spinning between the many small parallel regions of a frame and puts its threads to sleep
instead. Measured on 2 cores (0.6B, int8, one row): 82 ms a step alone, 124 ms with one idle two-thread pool beside
it. So the threads that serve the event loop (`helper_thread_pool`: voice cloning, text preparation) run torch on
one thread; the model loads on a thread that ends when it is done, on one thread when another model may be serving;
and an engine thread ends when it has had no work for a while (`rows.py`), taking its pool with it."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor

import torch

from ..errors import ConfigurationError

log = logging.getLogger(__name__)


def pin_engine_thread(cores: set[int] | None, announce: bool = True) -> None:
    """Pin the calling thread to `cores` and give torch one intra-op thread per core; with None, leave the thread
    where it is and give torch one thread per core the process may use, unless OMP_NUM_THREADS chose already.
    `announce` logs where (an engine's later threads, started as work comes, log it at debug level).

    Call it first thing on the engine thread: Linux sets affinity per thread (pid 0 is the caller), and the threads
    it starts later, torch's OpenMP workers among them, inherit it."""
    allowed = os.sched_getaffinity(0)
    if cores is not None:
        refused = cores - allowed
        if refused:
            raise ConfigurationError(
                f"INFERENCE_CPU_CORES names cores this process may not use: {core_list(refused)} "
                f"(it may use {core_list(allowed)})",
                param="inference_cpu_cores",
            )
        os.sched_setaffinity(0, cores)
        use_torch_threads(len(cores))
        reason = "INFERENCE_CPU_CORES"
    elif os.environ.get("OMP_NUM_THREADS"):
        # Set again: torch read it at start, but a model load since may have raised the count (model_manager.py).
        use_torch_threads(int(os.environ["OMP_NUM_THREADS"]))
        reason = "OMP_NUM_THREADS"
    else:
        use_torch_threads(len(allowed))
        reason = "the cores this process may use"
    log.log(
        logging.INFO if announce else logging.DEBUG,
        "engine thread on cores %s with %d torch threads (%s)",
        core_list(os.sched_getaffinity(0)),
        torch.get_num_threads(),
        reason,
    )


def core_list(cores: set[int]) -> str:
    """Cores in taskset's syntax: {0, 1, 2, 3, 6} -> 0-3,6."""
    ordered = sorted(cores)
    runs: list[list[int]] = []
    for core in ordered:
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def use_torch_threads(count: int) -> None:
    """Give the calling thread `count` intra-op threads for good. torch sizes a thread's pool on its first parallel
    operation, from the count last set by any thread of the process; asking for the count first makes that happen
    now, so that a count set later by another thread does not replace this one."""
    torch.get_num_threads()
    torch.set_num_threads(count)


def helper_thread_pool() -> ThreadPoolExecutor:
    """The event loop's default executor: threads whose torch work runs on one intra-op thread, so that they never
    start an OpenMP pool beside the engine's (see the module's notes)."""
    return ThreadPoolExecutor(thread_name_prefix="helper", initializer=use_torch_threads, initargs=(1,))
