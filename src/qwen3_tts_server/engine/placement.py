"""Where the engine thread runs on the CPU: INFERENCE_CPU_CORES pins it (the earlier server's setting) and torch's
intra-op threads follow the cores it has, so its OpenMP pool never outnumbers them."""

from __future__ import annotations

import logging
import os

import torch

from ..errors import ConfigurationError

log = logging.getLogger(__name__)


def pin_engine_thread(cores: set[int] | None) -> None:
    """Pin the calling thread to `cores` and give torch one intra-op thread per core; with None, leave the thread
    where it is and give torch one thread per core the process may use, unless OMP_NUM_THREADS chose already.

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
        torch.set_num_threads(len(cores))
        reason = "INFERENCE_CPU_CORES"
    elif os.environ.get("OMP_NUM_THREADS"):
        reason = "OMP_NUM_THREADS"  # torch read it at start
    else:
        torch.set_num_threads(len(allowed))
        reason = "the cores this process may use"
    log.info(
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
