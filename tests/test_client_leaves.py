"""Clients that leave before their response is complete, against a real uvicorn serving the app in this
process: a stream is logged as incomplete with its real figures, and a whole-file request stops generating."""

from __future__ import annotations

import logging
import threading
import time

import httpx
import pytest
import uvicorn

from in_process import make_app
from qwen3_tts_server.testing.live_server import free_port

LONG = {"model": "tts-1", "voice": "alloy", "input": "A sentence that takes a while to say.", "seed": 0}


@pytest.fixture
def served(models, tmp_path):
    """(base url, app) of the app on a real uvicorn; the model runs to its 2000-frame cap with seed 0."""
    app = make_app(models["custom_voice"], data_dir=tmp_path, max_batch_size=2, max_request_frames=2000)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def active_streams(base: str) -> int:
    return httpx.get(f"{base}/health").json()["active_streams"]


def wait_for(predicate, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_stream_left_midway_is_logged_incomplete_with_its_figures(served, caplog):
    base, app = served
    with caplog.at_level(logging.INFO, logger="qwen3_tts_server.request"):
        started = time.monotonic()
        with httpx.stream("POST", f"{base}/v1/audio/speech", json={**LONG, "response_format": "pcm"}) as response:
            assert len(next(response.iter_bytes())) > 0
        assert wait_for(lambda: active_streams(base) == 0), "the stream's engine row is freed"
        assert wait_for(
            lambda: any(r.name == "qwen3_tts_server.request" and r.path == "/v1/audio/speech" for r in caplog.records)
        )
    elapsed_ms = 1000 * (time.monotonic() - started)
    line = next(r for r in caplog.records if r.name == "qwen3_tts_server.request" and r.path == "/v1/audio/speech")
    assert line.completed is False
    assert 0 < line.total_ms <= elapsed_ms and line.frames > 0 and line.first_audio_ms > 0
    durations = app.state.services.metrics.duration.labels("/v1/audio/speech")
    assert durations._sum.get() == 0, "an incomplete request adds no sample to the latency histogram"


def test_a_whole_file_request_stops_generating_when_its_client_leaves(served):
    base, _ = served
    with pytest.raises(httpx.ReadTimeout):
        body = {**LONG, "input": " ".join([LONG["input"]] * 30), "stream": False}  # segments of hundreds of frames
        httpx.post(f"{base}/v1/audio/speech", json=body, timeout=1.5)
    # Thousands of frames take long here: the row must go at once, not when the audio is done.
    assert wait_for(lambda: active_streams(base) == 0, within=5.0)
