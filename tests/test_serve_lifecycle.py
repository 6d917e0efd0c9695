"""`qwen3-tts-server serve` as a process: JSON log lines, a Unix socket, the process title, the health probe,
and SIGTERM draining in-flight streams."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from qwen3_tts_server.testing.live_server import live_process

PCM_FRAME_BYTES = 1920 * 2  # 80 ms of 24 kHz 16-bit mono
LONG_TEXT = "This stream keeps going for a good while so that the server is stopped in the middle of it. " * 2


def log_records(live) -> list[dict]:
    """Every line the server wrote, each parsed as JSON (a line that is not JSON fails the test)."""
    return [json.loads(line) for line in live.log_path.read_text().splitlines() if line.strip()]


def test_json_logs_unix_socket_title_and_probe(checkpoint_dirs):
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", uds=True) as live:
        with live.client(timeout=120) as client:
            body = {"voice": "alloy", "input": "Hello 42.", "response_format": "wav", "stream": False, "seed": 1}
            spoken = client.post("/v1/audio/speech", json=body, headers={"X-Request-Id": "probe-1"})
        cmdline = Path(f"/proc/{live.process.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        probe = subprocess.run(
            [sys.executable, "-m", "qwen3_tts_server", "healthcheck", "--uds", live.uds],
            capture_output=True,
            text=True,
            timeout=60,
        )
        live.process.send_signal(signal.SIGTERM)
        assert live.process.wait(timeout=60) == 0
        records = log_records(live)
    assert spoken.status_code == 200 and spoken.content[:4] == b"RIFF"
    assert cmdline.startswith("qwen3-tts-server serve")
    assert probe.returncode == 0 and "ready" in probe.stdout
    request = next(r for r in records if r.get("request_id") == "probe-1" and r["logger"].endswith("request"))
    assert (request["status"], request["route"], request["voice"], request["format"]) == (
        200,
        "/v1/audio/speech",
        "alloy",
        "wav",
    )
    for field in ("ts", "level", "msg", "characters", "frames", "queue_ms", "first_audio_ms", "infer_ms", "total_ms"):
        assert request[field] is not None, field
    assert any(r["logger"] == "uvicorn.error" and "Application shutdown complete" in r["msg"] for r in records)
    assert not any("Hello" in json.dumps(r) for r in records)  # the text only at debug level


def stream_in_background(live, received: threading.Event) -> dict:
    """Start a streamed pcm request in a thread; `received` is set on its first audio bytes."""
    outcome: dict = {}

    def run():
        # Seeded: with seed 0 the tiny random model speaks on to its frame budget instead of stopping early.
        body = {"voice": "alloy", "input": LONG_TEXT, "response_format": "pcm", "stream": True, "seed": 0}
        try:
            with live.client(timeout=300) as client, client.stream("POST", "/v1/audio/speech", json=body) as response:
                data = b""
                for chunk in response.iter_raw():
                    data += chunk
                    received.set()
                outcome["bytes"] = len(data)
        except httpx.HTTPError as exc:
            outcome["error"] = exc
        received.set()

    outcome["thread"] = threading.Thread(target=run)
    outcome["thread"].start()
    return outcome


def test_sigterm_lets_the_stream_in_flight_finish(checkpoint_dirs):
    # A grace the stream cannot outlast on a busy machine (the default 30 s can be, by the long text's whole
    # budget): what is tested is that a stream inside its grace goes on to its end.
    env = {"SHUTDOWN_GRACE": "300"}
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=env) as live:
        received = threading.Event()
        outcome = stream_in_background(live, received)
        assert received.wait(timeout=120)
        live.process.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        with pytest.raises(httpx.ConnectError), live.client(timeout=5) as client:
            client.get("/health")  # no longer admitted
        outcome["thread"].join(timeout=300)
        assert live.process.wait(timeout=60) == 0
        records = log_records(live)
    assert "error" not in outcome, outcome.get("error")
    shutting_down = next(i for i, r in enumerate(records) if r["msg"] == "Shutting down")
    finished = next(i for i, r in enumerate(records) if r.get("route") == "/v1/audio/speech")
    assert finished > shutting_down  # the stream was still going when the signal came, and went on to its end
    line = records[finished]
    assert line["completed"] is True and line["frames"] * PCM_FRAME_BYTES == outcome["bytes"] > 0


def test_sigterm_cancels_what_outlasts_the_grace_period(checkpoint_dirs):
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env={"SHUTDOWN_GRACE": "1"}) as live:
        received = threading.Event()
        outcome = stream_in_background(live, received)
        assert received.wait(timeout=120)
        stopped = time.monotonic()
        live.process.send_signal(signal.SIGTERM)
        assert live.process.wait(timeout=60) == 0
        took = time.monotonic() - stopped
        outcome["thread"].join(timeout=60)
        records = log_records(live)
    assert took < 15, took
    assert "error" in outcome  # cut short: the client sees an incomplete response, never a clean short one
    line = next(r for r in records if r.get("route") == "/v1/audio/speech")
    assert line["completed"] is False
