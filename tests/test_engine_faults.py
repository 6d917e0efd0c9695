"""Faults injected into a real tiny model: a prefill, a step or a codec decode that raises fails only the
requests it touched, with a typed error that never carries the exception's text, and the engine goes on; a
CUDA out-of-memory is a 503; an engine thread that ends says why on /ready and /health, refuses new requests at
once and ends the open ones. Also what /health reports besides, and Retry-After on a full queue."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
import torch
from starlette.testclient import TestClient

from in_process import make_app, run_in_app
from qwen3_tts_server.api.app import create_app
from qwen3_tts_server.config import Settings
from qwen3_tts_server.engine import synthesis as engine_module
from qwen3_tts_server.engine.model_manager import ModelManager
from qwen3_tts_server.engine.registry import HostedModel, ModelRegistry
from qwen3_tts_server.engine.synthesis import SYNTHESIS_FAILED, Engine, typed_error
from qwen3_tts_server.errors import (
    EngineOutOfMemoryError,
    EngineStoppedError,
    InvalidInputError,
    SynthesisFailedError,
    TTSError,
)
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from test_engine import REQUESTS, collect, job_for, run_engine

SECRET = "injected-fault-7f3a"  # in every injected exception's text: it must never reach a client
TIMEOUT = 60  # seconds: a stream that hangs fails its test instead of blocking it


class Fatal(BaseException):
    """Not an Exception: no per-request guard catches it, so it ends the engine thread."""


def inject(monkeypatch, target, name: str, error: BaseException, when: Callable[..., bool] = lambda *_: True) -> list:
    """Make `target.name` raise `error` the first time `when(*args)` holds (later calls run as before); returns
    the arguments of the failed call, once it has happened."""
    original = getattr(target, name)
    failed: list = []

    def faulty(*args, **kwargs):
        if not failed and when(*args, **kwargs):
            failed.append(args)
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, faulty)
    return failed


def solo(model, request, params, frames: int) -> np.ndarray:
    """The codes `request` gets alone, running to `frames` frames."""
    return model.generate([request], params, max_frames=frames, suppress_eos=True)[0].codes


def assert_generic(error: TTSError) -> None:
    assert type(error) is SynthesisFailedError and error.status == 500 and error.code == "internal_error"
    assert error.flat_code == "SYNTHESIS_FAILED"
    assert str(error) == SYNTHESIS_FAILED and SECRET not in str(error)


def assert_streamed(model, result, expected: np.ndarray) -> None:
    """A stream's codes are `expected` and its audio is their offline decode."""
    codes, audio, _ = result
    np.testing.assert_array_equal(codes, expected)
    assert np.abs(audio - model.decode(codes)).max() <= 1e-5


def test_a_failed_prefill_fails_its_request_alone_and_frees_its_row(models, monkeypatch, caplog):
    model = models["custom_voice"]
    params = [model.sampling(seed=20 + i) for i in range(4)]
    expected = [solo(model, REQUESTS[i], params[i], 40) for i in (0, 1, 3)]
    # Rows go lowest first: the running streams hold rows 0 and 1, the faulty request takes row 2 and fails.
    failed = inject(monkeypatch, model.talker.model, "prefill_packed", RuntimeError(SECRET), lambda *a: a[3] == [2])

    async def scenario(engine):
        def start(i):
            job = job_for(model, REQUESTS[i], params[i], max_frames=40, suppress_eos=True)
            return asyncio.create_task(collect(engine.submit(job)))

        running = [start(0), start(1)]
        while engine.active < 2:  # both running before the faulty one arrives: it is prefilled alone
            await asyncio.sleep(0.01)
        with pytest.raises(TTSError) as error:
            await asyncio.wait_for(collect(engine.submit(job_for(model, REQUESTS[2], params[2]))), TIMEOUT)
        rows_after_fault = engine.generator.active
        running.append(start(3))  # the next request, in the freed row
        return error.value, rows_after_fault, await asyncio.wait_for(asyncio.gather(*running), TIMEOUT), engine

    error, rows_after_fault, results, engine = run_engine(model, scenario, max_batch_size=3)
    assert failed and set(rows_after_fault) <= {0, 1}
    assert_generic(error)
    for result, codes in zip(results, expected, strict=True):
        assert_streamed(model, result, codes)
    assert engine.active == 0 and engine.generator.active == [] and engine.failure is None
    assert "a prefill failed" in caplog.text and f"RuntimeError: {SECRET}" in caplog.text  # the log has it all


def test_a_failed_step_fails_its_rows_and_the_next_request_works(models, monkeypatch):
    model = models["custom_voice"]
    params = model.sampling(seed=4)
    expected = solo(model, REQUESTS[2], params, 12)
    failed = inject(
        monkeypatch, FrameGenerator, "step", RuntimeError(SECRET), lambda generator: len(generator.active) == 2
    )

    async def scenario(engine):
        jobs = [job_for(model, r, model.sampling(seed=1), max_frames=40, suppress_eos=True) for r in REQUESTS[:2]]
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(collect(engine.submit(job)) for job in jobs), return_exceptions=True), TIMEOUT
        )
        rows_after_fault = (engine.active, engine.generator.active)
        job = job_for(model, REQUESTS[2], params, max_frames=12, suppress_eos=True)
        return outcomes, rows_after_fault, await asyncio.wait_for(collect(engine.submit(job)), TIMEOUT)

    outcomes, rows_after_fault, result = run_engine(model, scenario, max_batch_size=4)
    assert failed and rows_after_fault == (0, [])
    for outcome in outcomes:
        assert_generic(outcome)
    assert_streamed(model, result, expected)


def test_a_failed_decode_fails_only_its_chunk_group(models, monkeypatch):
    model = models["custom_voice"]
    params = [model.sampling(seed=30), model.sampling(seed=31)]
    expected = [solo(model, REQUESTS[0], params[0], 31), solo(model, REQUESTS[1], params[1], 12)]
    # The first stream's chunks are 1, 2, 4, 8, 8, 8 frames, the second's 3 each: a 3-frame group is the second's.
    failed = inject(
        monkeypatch, model.codec_stream, "decode", RuntimeError(SECRET), lambda _, codes: codes.shape[1] == 3
    )

    async def scenario(engine):
        kept = job_for(model, REQUESTS[0], params[0], max_frames=31, suppress_eos=True)
        lost = job_for(model, REQUESTS[1], params[1], max_frames=12, suppress_eos=True, chunk_schedule=(3,))
        outcomes = await asyncio.wait_for(
            asyncio.gather(collect(engine.submit(kept)), collect(engine.submit(lost)), return_exceptions=True), TIMEOUT
        )
        again = await asyncio.wait_for(collect(engine.submit(lost)), TIMEOUT)  # the decode fault was once
        return outcomes, again, engine

    (kept, lost), again, engine = run_engine(model, scenario, max_batch_size=4)
    assert len(failed) == 1 and len(failed[0][0]) == 1, "the failed group held the 3-frame stream alone"
    assert_streamed(model, kept, expected[0])
    assert_generic(lost)
    assert_streamed(model, again, expected[1])
    assert engine.active == 0 and engine.generator.active == []


def test_a_model_that_fails_to_load_fails_the_waiting_requests_and_loads_on_the_next(models, checkpoint_dirs):
    model = models["custom_voice"]
    loads = []

    def load():
        loads.append(True)
        if len(loads) == 1:
            raise RuntimeError(SECRET)
        return Qwen3TTSModel.load(checkpoint_dirs["custom_voice"])

    engine = Engine(ModelManager(load, warmup=None), max_batch_size=2).start()
    job = job_for(model, REQUESTS[0], model.sampling(seed=2), max_frames=3, suppress_eos=True)

    async def scenario():
        with pytest.raises(TTSError) as error:
            await asyncio.wait_for(collect(engine.submit(job)), TIMEOUT)
        return error.value, await asyncio.wait_for(collect(engine.submit(job)), TIMEOUT)

    try:
        error, (codes, _, _) = asyncio.run(scenario())
    finally:
        engine.stop()
    assert_generic(error)
    assert len(loads) == 2 and len(codes) == 3 and engine.failure is None


def test_a_burst_whose_prefill_together_fails_is_prefilled_one_by_one_and_only_a_faulty_request_fails(
    models, monkeypatch
):
    model = models["custom_voice"]
    params = [model.sampling(seed=30 + i) for i in range(3)]
    expected = [solo(model, REQUESTS[i], params[i], 8) for i in range(3)]
    packed = model.talker.model.prefill_packed
    calls: list[list[int]] = []

    def faulty(x, lengths, cache, rows):  # a forward of several prompts fails (out of memory, say)
        calls.append(rows)
        if len(rows) > 1:
            raise RuntimeError(SECRET)
        return packed(x, lengths, cache, rows)

    monkeypatch.setattr(model.talker.model, "prefill_packed", faulty)

    async def burst(engine, frames: list[int]):
        jobs = [job_for(model, REQUESTS[i], params[i], max_frames=n, suppress_eos=True) for i, n in enumerate(frames)]
        with engine._cv:  # the engine thread sees the three at once (a busy machine could wake it between them)
            streams = [engine.submit(job) for job in jobs]
        return await asyncio.wait_for(asyncio.gather(*(collect(s) for s in streams), return_exceptions=True), TIMEOUT)

    async def scenario(engine):
        engine.start(preload=True)
        good = await burst(engine, [8, 8, 8])
        calls_good = list(calls)
        with_a_bad_one = await burst(engine, [8, 0, 8])  # a frame budget of 0 cannot be prefilled
        return good, calls_good, with_a_bad_one

    engine = Engine(model, max_batch_size=3)
    try:
        good, calls_good, with_a_bad_one = asyncio.run(scenario(engine))
    finally:
        engine.stop()
    assert calls_good == [[0, 1, 2], [0], [1], [2]], "together, then one by one"
    for result, codes in zip(good, expected, strict=True):
        assert_streamed(model, result, codes)
    first, bad, third = with_a_bad_one
    assert isinstance(bad, InvalidInputError) and bad.param == "max_frames"
    assert_streamed(model, first, expected[0])
    assert_streamed(model, third, expected[2])
    assert engine.generator.active == [] and engine.failure is None


def test_out_of_memory_in_a_prefill_is_a_503_for_that_request(models, monkeypatch):
    model = models["custom_voice"]
    oom = torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 2.00 GiB {SECRET}")
    failed = inject(monkeypatch, model.talker.model, "prefill_packed", oom)

    async def scenario(engine):
        job = job_for(model, REQUESTS[0], model.sampling(seed=2), max_frames=6, suppress_eos=True)
        with pytest.raises(EngineOutOfMemoryError) as error:
            await asyncio.wait_for(collect(engine.submit(job)), TIMEOUT)
        rows_after_fault = engine.generator.active
        return error.value, rows_after_fault, await asyncio.wait_for(collect(engine.submit(job)), TIMEOUT)

    error, rows_after_fault, result = run_engine(model, scenario, max_batch_size=2)
    assert failed and rows_after_fault == []
    assert error.status == 503 and error.code == "out_of_memory" and "out of memory" in str(error)
    assert SECRET not in str(error)
    assert_streamed(model, result, solo(model, REQUESTS[0], model.sampling(seed=2), 6))


def test_out_of_memory_gives_the_cached_gpu_memory_back(monkeypatch):
    emptied = []
    monkeypatch.setattr(engine_module.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(engine_module.torch.cuda, "empty_cache", lambda: emptied.append(True))
    assert isinstance(typed_error(torch.OutOfMemoryError(SECRET), "a test"), EngineOutOfMemoryError)
    assert emptied == [True]
    assert_generic(typed_error(ValueError(SECRET), "a test"))


def test_an_engine_thread_that_ends_fails_every_stream_and_refuses_new_ones(models, monkeypatch):
    model = models["custom_voice"]
    engine = Engine(model, max_batch_size=1)
    crash = threading.Event()  # set: the engine thread's next iteration raises outside every per-request guard
    inject(monkeypatch, engine, "_expire", Fatal(SECRET), lambda: crash.is_set())
    engine.start()

    async def scenario():
        job = job_for(model, REQUESTS[0], model.sampling(seed=3), max_frames=2000, suppress_eos=True)
        running = engine.submit(job)
        waiting = engine.submit(job)  # one row: it waits
        first = await asyncio.wait_for(running.__anext__(), TIMEOUT)
        crash.set()
        outcomes = await asyncio.wait_for(
            asyncio.gather(collect(running), collect(waiting), return_exceptions=True), TIMEOUT
        )
        with pytest.raises(EngineStoppedError) as refused:
            engine.submit(job)  # at once, not queued
        return first, outcomes, refused.value

    try:
        first, outcomes, refused = asyncio.run(scenario())
    finally:
        engine.stop()
    assert first.frames == 1
    assert engine.failure == "the engine thread stopped on an unexpected Fatal"
    for error in (*outcomes, refused):
        assert isinstance(error, EngineStoppedError) and error.status == 503 and "Fatal" in str(error)
        assert SECRET not in str(error)
    assert engine.active == engine.waiting == 0


# -- through the HTTP API and the WebSocket -----------------------------------------------------------------------


def test_http_clients_get_a_500_envelope_or_an_sse_error_event(models, tmp_path, monkeypatch):
    model = models["custom_voice"]
    app = make_app(model, data_dir=tmp_path, max_batch_size=2, max_request_frames=6)
    body = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", "response_format": "wav", "stream": False}

    async def scenario(_, http):
        inject(monkeypatch, model.talker.model, "prefill_packed", RuntimeError(SECRET))
        whole = await asyncio.wait_for(http.post("/v1/audio/speech", json=body), TIMEOUT)
        inject(monkeypatch, model.talker.model, "prefill_packed", RuntimeError(SECRET))
        sse = await asyncio.wait_for(http.post("/v1/audio/speech", json={**body, "stream_format": "sse"}), TIMEOUT)
        inject(monkeypatch, model.talker.model, "prefill_packed", RuntimeError(SECRET))
        streamed = await asyncio.wait_for(http.post("/v1/audio/speech", json={**body, "stream": True}), TIMEOUT)
        after = await asyncio.wait_for(http.post("/v1/audio/speech", json=body), TIMEOUT)
        return whole, sse, streamed, after, await http.get("/ready")

    whole, sse, streamed, after, ready = run_in_app(app, scenario)
    # A streamed response that fails before its first audio still gets its status: not a 200 cut short.
    assert streamed.status_code == 500 and streamed.json()["error"]["message"] == SYNTHESIS_FAILED
    assert whole.status_code == 500 and SECRET not in whole.text
    assert whole.json()["error"] == {
        "message": SYNTHESIS_FAILED, "type": "server_error", "param": None, "code": "internal_error"
    }  # fmt: skip
    events = [json.loads(line[6:]) for line in sse.text.splitlines() if line.startswith("data: ")]
    assert sse.status_code == 200 and SECRET not in sse.text
    assert [e["type"] for e in events] == ["error"] and events[0]["error"]["code"] == "internal_error"
    assert after.status_code == 200 and after.content[:4] == b"RIFF" and len(after.content) > 44
    assert ready.status_code == 200


def test_a_websocket_client_gets_an_error_event_and_the_session_goes_on(models, tmp_path, monkeypatch):
    model = models["custom_voice"]
    app = make_app(model, data_dir=tmp_path, max_batch_size=2, max_request_frames=6)
    failed = inject(monkeypatch, model.talker.model, "prefill_packed", RuntimeError(SECRET))

    def until(ws, kind: str) -> list:
        messages = []
        while not (messages and isinstance(messages[-1], dict) and messages[-1]["type"] == kind):
            message = ws.receive()
            messages.append(json.loads(message["text"]) if message.get("text") else message.get("bytes"))
        return messages

    with TestClient(app) as client, client.websocket_connect("/v1/audio/speech/ws") as ws:
        ws.send_json({"type": "session.update", "voice": "Vivian", "seed": 1})
        until(ws, "session.updated")
        ws.send_json({"type": "input_text", "text": "Hello."})
        faulty = until(ws, "done")
        ws.send_json({"type": "input_text", "text": "Hello."})
        spoken = until(ws, "done")
    errors = [m for m in faulty if isinstance(m, dict) and m["type"] == "error"]
    assert failed and len(errors) == 1 and errors[0]["error"]["code"] == "internal_error"
    assert SECRET not in json.dumps(faulty)
    assert sum(len(m) for m in spoken if isinstance(m, bytes)) > 0
    assert not any(isinstance(m, dict) and m["type"] == "error" for m in spoken)


def test_ready_and_health_say_when_the_engine_has_stopped(models, tmp_path, monkeypatch):
    app = make_app(models["custom_voice"], data_dir=tmp_path, max_batch_size=1, max_request_frames=6)
    engine = app.state.services.registry.default.engine
    body = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", "stream": False}

    async def scenario(_, http):
        healthy = await http.get("/health"), await http.get("/ready")
        inject(monkeypatch, engine, "_expire", Fatal(SECRET))  # the next iteration ends the thread
        in_flight = await asyncio.wait_for(http.post("/v1/audio/speech", json=body), TIMEOUT)
        refused = await asyncio.wait_for(http.post("/v1/audio/speech", json=body), TIMEOUT)
        return healthy, in_flight, refused, await http.get("/health"), await http.get("/ready")

    (health_ok, ready_ok), in_flight, refused, health, ready = run_in_app(app, scenario)
    assert health_ok.status_code == ready_ok.status_code == 200 and health_ok.json()["status"] == "ok"
    for response in (in_flight, refused):
        assert response.status_code == 503 and response.json()["error"]["code"] == "engine_stopped"
        assert "Fatal" in response.json()["error"]["message"] and SECRET not in response.text
    reason = "the engine thread stopped on an unexpected Fatal"
    assert health.status_code == 503 and health.json()["status"] == "failed" and health.json()["error"] == reason
    assert ready.status_code == 503 and ready.json()["ready"] is False and ready.json()["error"] == reason


def test_one_hosted_models_stopped_engine_fails_health_and_only_its_requests(
    models, checkpoint_dirs, tmp_path, monkeypatch
):
    hosted = [
        HostedModel(name, str(checkpoint_dirs[name]), ModelManager.fixed(models[name]), checkpoint_dirs[name])
        for name in ("custom_voice", "voice_design")
    ]
    settings = Settings.load(model_id=str(checkpoint_dirs["custom_voice"]), data_dir=tmp_path, max_request_frames=6)
    app = create_app(settings, ModelRegistry(hosted))
    preset = {"voice": "alloy", "input": "Hello there.", "stream": False}
    designed = {**preset, "model": "voice_design", "instructions": "Calm."}

    async def scenario(_, http):
        inject(monkeypatch, hosted[1].engine, "_expire", Fatal(SECRET))
        failed = await asyncio.wait_for(
            http.post("/v1/audio/speech", json={**designed, "instructions": "Calm."}), TIMEOUT
        )
        return failed, await http.post("/v1/audio/speech", json=preset), await http.get("/health")

    failed, served, health = run_in_app(app, scenario)
    assert failed.status_code == 503 and failed.json()["error"]["code"] == "engine_stopped"
    assert served.status_code == 200 and served.headers["x-model"] == "custom_voice"  # the other model serves on
    reason = "the engine thread stopped on an unexpected Fatal"
    assert health.status_code == 503 and health.json()["status"] == "failed" and health.json()["error"] == reason
    assert health.json()["models"]["voice_design"]["error"] == reason and SECRET not in health.text


def test_health_reports_queue_limit_gpu_and_output_cache(models, tmp_path):
    app = make_app(
        models["custom_voice"], data_dir=tmp_path, max_queue_depth=7, audio_cache_max=8, max_request_frames=6
    )
    body = {
        "model": "tts-1",
        "voice": "alloy",
        "input": "Cached.",
        "response_format": "wav",
        "stream": False,
        "seed": 5,
    }

    async def scenario(_, http):
        before = (await http.get("/health")).json()
        spoken = [(await http.post("/v1/audio/speech", json=body)).headers["x-cache"] for _ in range(3)]
        return before, spoken, (await http.get("/health")).json()

    before, spoken, after = run_in_app(app, scenario)
    assert before["max_queue_depth"] == after["max_queue_depth"] == 7 and "gpu_name" not in before
    empty = {"backend": "memory", "entries": 0, "hits": 0, "misses": 0, "hit_rate": None}
    assert before["audio_cache"] == empty and spoken == ["miss", "hit", "hit"]
    assert after["audio_cache"] == {"backend": "memory", "entries": 1, "hits": 2, "misses": 1, "hit_rate": 2 / 3}


def test_health_reports_what_a_redis_cache_tells_cheaply_and_no_cache_as_null(models, tmp_path):
    async def health(_, http):
        await http.post("/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": "Hi.", "stream": False})
        return (await http.get("/health")).json()

    down = make_app(
        models["custom_voice"],
        data_dir=tmp_path,
        max_request_frames=6,
        audio_cache_max=8,
        redis_url="redis://127.0.0.1:1/0",
    )
    redis = run_in_app(down, health)["audio_cache"]
    assert redis == {"backend": "redis", "entries": None, "hits": 0, "misses": 1, "hit_rate": 0.0}
    assert run_in_app(make_app(models["custom_voice"], data_dir=tmp_path), health)["audio_cache"] is None


def test_a_full_queue_answers_503_with_the_estimated_retry_after(models, tmp_path, monkeypatch):
    model = models["custom_voice"]
    app = make_app(model, data_dir=tmp_path, max_batch_size=1, max_queue_depth=1)
    engine = app.state.services.registry.default.engine
    for measurement in ("observe_step", "observe_request"):  # the measured pace, fixed for the test
        monkeypatch.setattr(engine.pace, measurement, lambda _: None)
    engine.pace.step_seconds, engine.pace.steps_per_request = 0.05, 100

    async def scenario(_, http):
        job = job_for(model, REQUESTS[0], model.sampling(seed=1), max_frames=2000, suppress_eos=True)
        running = engine.submit(job)
        await asyncio.wait_for(running.__anext__(), TIMEOUT)  # it holds the only row
        queued = engine.submit(replace(job, continuation=True))  # never refused; the queue is full now
        busy = await http.post("/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": "Hi."})
        await running.aclose()
        await queued.aclose()
        return busy

    busy = run_in_app(app, scenario)
    assert busy.status_code == 503 and busy.json()["error"]["code"] == "server_busy"
    assert busy.headers["retry-after"] == "5"  # 1 waiting / 1 row * 100 frames * 0.05 s
