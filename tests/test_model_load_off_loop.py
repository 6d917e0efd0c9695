"""The event loop never waits for the model: a load runs on its own thread while the probes answer, concurrent
cold requests share one load, what start-up made is out of the garbage collector's sight, and /v1/models and
/v1/audio/voices answer from the checkpoint's config."""

from __future__ import annotations

import asyncio
import gc
import statistics
import threading
import time

import pytest

from in_process import make_app, run_in_app
from qwen3_tts_server.engine.model_manager import ModelManager, ModelState
from qwen3_tts_server.model.tts.loading import prepare_loading
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

LOAD_SECONDS = 3.0
PROBES = ("/health", "/ready", "/metrics")


class CountingLoader:
    """Loads the real checkpoint, then holds on for `delay` seconds (a big model's load); counts its calls."""

    def __init__(self, directory, delay: float = 0.0):
        self.directory, self.delay = directory, delay
        self.calls = 0
        self.started = threading.Event()

    def __call__(self) -> Qwen3TTSModel:
        self.calls += 1
        self.started.set()
        model = Qwen3TTSModel.load(self.directory)
        time.sleep(self.delay)
        return model


def cold_manager(loader: CountingLoader, idle_timeout: float = 0.0) -> ModelManager:
    return ModelManager(loader, idle_timeout=idle_timeout, describe=lambda: prepare_loading(loader.directory))


def test_probes_answer_while_requests_share_one_slow_load(checkpoint_dirs, tmp_path):
    """Throughout a load, no probe waits for it (one that did would take the rest of the load, seconds) and they
    answer in milliseconds. Their tail beside a real load is a benchmark's (benchmarks/multi_model.py): a load's
    GIL holds (its first traces', about 200 ms) show in it, and on this shared machine so does any other process."""
    loader = CountingLoader(checkpoint_dirs["custom_voice"], delay=LOAD_SECONDS)
    manager = cold_manager(loader)
    body = {"voice": "alloy", "input": "Cold start.", "response_format": "pcm", "stream": False, "seed": 1}

    async def scenario(_, http):
        cold = [asyncio.create_task(http.post("/v1/audio/speech", json=body)) for _ in range(3)]
        cold.append(asyncio.create_task(http.get("/v1/audio/voices")))
        await asyncio.to_thread(loader.started.wait, 10)
        latencies: dict[str, list[float]] = {path: [] for path in PROBES}
        states = set()
        while manager.state is not ModelState.READY:
            for path in PROBES:
                began = time.perf_counter()
                response = await http.get(path)
                latencies[path].append(time.perf_counter() - began)
                assert response.status_code == 200, (path, response.text)
                if path == "/ready":
                    states.add(response.json()["model"])
            await asyncio.sleep(0.01)
        return latencies, states, await asyncio.gather(*cold)

    latencies, states, responses = run_in_app(make_app(manager, data_dir=tmp_path), scenario)
    assert "loading" in states
    for path, measured in latencies.items():
        assert len(measured) >= 20, path  # the probes ran throughout the load
        assert statistics.median(measured) < 0.05, (path, f"median {1000 * statistics.median(measured):.1f} ms")
        assert max(measured) < LOAD_SECONDS / 3, (path, f"a probe took {max(measured):.2f} s")
    assert [response.status_code for response in responses] == [200] * 4
    assert all(len(response.content) >= 3840 for response in responses[:3])  # at least a frame of audio each
    assert loader.calls == 1 and manager.loads == 1


def test_what_start_up_made_is_out_of_the_collectors_sight(checkpoint_dirs, tmp_path):
    """A full collection holds the GIL while it scans, and one comes whenever enough objects were made: the modules,
    tokenizers and app that start-up made (some 360,000 objects in a server, 186 ms a collection) are frozen while the
    app serves."""
    gc.unfreeze()
    manager = cold_manager(CountingLoader(checkpoint_dirs["custom_voice"]))

    async def scenario(_, http):
        return gc.get_freeze_count()

    assert run_in_app(make_app(manager, data_dir=tmp_path), scenario) > 100_000
    assert gc.get_freeze_count() == 0, "in sight again after shutdown, for the collection at exit"


def test_models_and_voices_come_from_the_config_without_a_load(checkpoint_dirs, tmp_path):
    loader = CountingLoader(checkpoint_dirs["custom_voice"])
    manager = cold_manager(loader, idle_timeout=3600)

    async def scenario(_, http):
        idle_since = manager.last_used
        models = (await http.get("/v1/models")).json()
        voices = (await http.get("/v1/audio/voices")).json()
        return models, voices, manager.last_used == idle_since

    models, voices, idle_kept = run_in_app(make_app(manager, data_dir=tmp_path), scenario)
    assert loader.calls == 0 and manager.state is ModelState.UNLOADED and manager.loaded is None
    assert idle_kept, "listing must not count as use: the model would never idle out"
    assert models["data"][0]["type"] == "custom_voice" and models["data"][0]["size"] == "tiny"
    by_id = {voice["id"]: voice for voice in voices["data"]}
    assert by_id["vivian"]["type"] == "preset" and by_id["alloy"]["alias_of"] == "ryan"


def test_a_failed_load_is_retried_by_the_next_caller(checkpoint_dirs):
    attempts = []

    def flaky() -> Qwen3TTSModel:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("disk hiccup")
        return Qwen3TTSModel.load(checkpoint_dirs["custom_voice"])

    manager = ModelManager(flaky, warmup=None)

    async def twice():
        with pytest.raises(RuntimeError, match="disk hiccup"):
            await manager.get_async()
        failed = manager.last_error
        return failed, await manager.get_async()

    failed, model = asyncio.run(twice())
    assert failed == "disk hiccup" and model is manager.loaded and manager.last_error is None
    assert len(attempts) == 2 and manager.state is ModelState.READY


def test_a_waiter_that_gives_up_does_not_cancel_the_load(checkpoint_dirs):
    loader = CountingLoader(checkpoint_dirs["custom_voice"], delay=0.3)
    manager = ModelManager(loader, warmup=None)

    async def impatient():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(manager.get_async(), 0.05)
        return await manager.get_async()

    assert asyncio.run(impatient()) is manager.loaded and loader.calls == 1
