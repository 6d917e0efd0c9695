"""Where the engine runs: INFERENCE_CPU_CORES pins the engine thread and sizes torch's intra-op pool, on a thread of
its own like the engine's; and the cuDNN settings a CUDA load makes (monkeypatched: there may be no GPU here)."""

from __future__ import annotations

import logging
import os
import threading
from typing import NamedTuple

import pytest
import torch

from qwen3_tts_server.engine.placement import core_list, pin_engine_thread
from qwen3_tts_server.errors import CheckpointError, ConfigurationError
from qwen3_tts_server.model.tts import loading

ALLOWED = os.sched_getaffinity(0)
several_cores = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two cores to tell a thread count from another")


@pytest.fixture(autouse=True)
def process_state(monkeypatch):
    """Torch's thread count is process-wide: put it back, and check the test thread was never pinned."""
    threads = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    yield
    torch.set_num_threads(threads)
    assert os.sched_getaffinity(0) == ALLOWED


class Placed(NamedTuple):
    affinity: set[int]
    threads: int
    error: Exception | None = None


def on_fresh_thread(cores: set[int] | None, start_on: set[int] | None = None) -> Placed:
    """Run pin_engine_thread(cores) on a new thread (first moved to `start_on`, as taskset would); that thread's
    affinity and torch thread count afterwards, and what the call raised."""
    placed = []

    def engine_thread() -> None:
        if start_on is not None:
            os.sched_setaffinity(0, start_on)
        error = None
        try:
            pin_engine_thread(cores)
        except Exception as exc:
            error = exc
        placed.append(Placed(os.sched_getaffinity(0), torch.get_num_threads(), error))

    thread = threading.Thread(target=engine_thread)
    thread.start()
    thread.join()
    return placed[0]


@several_cores
def test_cores_pin_the_engine_thread_and_size_torch_threads(caplog):
    core = max(ALLOWED)
    torch.set_num_threads(len(ALLOWED))
    with caplog.at_level(logging.INFO, logger="qwen3_tts_server.engine.placement"):
        assert on_fresh_thread({core}) == Placed({core}, 1)
    assert f"engine thread on cores {core} with 1 torch threads (INFERENCE_CPU_CORES)" in caplog.messages
    # the rest of the process (this thread) keeps every core: checked by the fixture


@several_cores
def test_all_allowed_cores_given_explicitly():
    torch.set_num_threads(1)
    assert on_fresh_thread(set(ALLOWED)) == Placed(ALLOWED, len(ALLOWED))


def test_cores_the_process_may_not_use_are_refused():
    outside = max(ALLOWED) + 1
    threads = torch.get_num_threads()
    affinity, threads_after, error = on_fresh_thread({min(ALLOWED), outside})
    assert isinstance(error, ConfigurationError) and error.param == "inference_cpu_cores"
    assert f"may not use: {outside} " in str(error)
    assert f"(it may use {core_list(ALLOWED)})" in str(error)
    assert (affinity, threads_after) == (ALLOWED, threads)  # nothing pinned, not even the cores that were allowed


@several_cores
def test_without_cores_torch_gets_a_thread_per_core_the_process_may_use():
    torch.set_num_threads(1)
    assert on_fresh_thread(None) == Placed(ALLOWED, len(ALLOWED))
    # a process started under taskset on one core: one thread, and the placement is left as it was
    core = min(ALLOWED)
    assert on_fresh_thread(None, start_on={core}) == Placed({core}, 1)


@several_cores
def test_without_cores_an_explicit_omp_num_threads_is_kept(monkeypatch, caplog):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)  # what torch made of it at start
    with caplog.at_level(logging.INFO, logger="qwen3_tts_server.engine.placement"):
        assert on_fresh_thread(None) == Placed(ALLOWED, 1)
    assert f"engine thread on cores {core_list(ALLOWED)} with 1 torch threads (OMP_NUM_THREADS)" in caplog.messages


def test_core_list_is_taskset_syntax():
    assert core_list({0, 1, 2, 3, 6}) == "0-3,6"
    assert core_list({5}) == "5"
    assert core_list({1, 3, 4}) == "1,3-4"


@pytest.fixture
def cuda_flags():
    """The process-wide flags a CUDA load sets, put back afterwards."""
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32
    yield
    cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32 = saved


def test_a_cuda_load_turns_cudnn_autotuning_off_and_tf32_on(cuda_flags, monkeypatch, tmp_path):
    """With the device monkeypatched to CUDA: the flags are set before the checkpoint is read, so an empty
    directory stops the load right after them. cuDNN's autotuning timed the streaming codec's every new (rows,
    chunk) shape again and stalled its streams for seconds on an H100 (benchmarks/results/gpu/): off, whatever it
    was before."""
    monkeypatch.setattr(loading, "parse_device", lambda name: torch.device("cuda"))
    torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = True, False
    with pytest.raises(CheckpointError):
        loading.load_checkpoint(tmp_path, device="cuda")
    assert not torch.backends.cudnn.benchmark and torch.backends.cuda.matmul.allow_tf32


def test_a_cpu_load_leaves_the_cuda_flags_alone(cuda_flags, tmp_path):
    torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = True, False
    with pytest.raises(CheckpointError):
        loading.load_checkpoint(tmp_path, device="cpu")
    assert torch.backends.cudnn.benchmark and not torch.backends.cuda.matmul.allow_tf32


@several_cores
def test_the_event_loops_helper_threads_run_torch_on_one_thread(models):
    """Cloning and text preparation run in the event loop's executor: one torch thread each there, so no second
    OpenMP pool competes with the engine's (engine/placement.py), whose thread keeps one per core."""
    import asyncio

    from in_process import make_app, run_in_app

    engine_threads = []

    async def scenario(_client, http):
        engine = app.state.services.registry.default.engine
        engine.add_step_listener(lambda *_: engine_threads.append(torch.get_num_threads()))
        body = {"model": "tts-1", "voice": "Vivian", "input": "Hi.", "stream": False}
        assert (await http.post("/v1/audio/speech", json=body)).status_code == 200
        return await asyncio.to_thread(torch.get_num_threads)

    app = make_app(models["custom_voice"])
    assert run_in_app(app, scenario) == 1
    assert engine_threads and set(engine_threads) == {len(ALLOWED)}
