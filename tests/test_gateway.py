"""`qwen3-tts-server gateway` as real processes: a worker started on the first request (once for concurrent ones),
unbuffered HTTP/SSE/WebSocket proxying, crash recovery, the idle stop, the API key and a graceful SIGTERM."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import soundfile as sf
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from qwen3_tts_server.testing.live_gateway import LiveGateway, live_gateway
from qwen3_tts_server.testing.live_server import live_process

pytestmark = pytest.mark.slow

SPEECH = "/v1/audio/speech"
TIMEOUT = 300
PCM_FRAME_BYTES = 1920 * 2  # 80 ms of 16-bit samples at 24 kHz
LONG_TEXT = (
    "The quick brown fox jumps over the lazy dog while the morning sun rises slowly above the quiet hills, "
    "and the farmers walk out into their fields to begin another long day of work."
)
API_KEY = "gateway-test-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def speech(text: str = "Hello there.", **options) -> dict:
    return {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "wav", "stream": False, **options}


def ws_url(gateway: LiveGateway) -> str:
    return gateway.base.replace("http://", "ws://", 1) + "/v1/audio/speech/ws"


def wait_for(condition, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        time.sleep(0.2)


def process_gone(pid: int) -> bool:
    """Exited and reaped: a zombie still has its /proc entry."""
    return not Path(f"/proc/{pid}").exists()


def scrape(gateway: LiveGateway) -> dict[str, float]:
    """GET /metrics without a key: sample name -> value summed over its labels."""
    text = httpx.get(gateway.base + "/metrics", timeout=TIMEOUT).text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


async def data_events(lines) -> list[dict]:
    return [json.loads(line[5:]) async for line in lines if line.startswith("data:")]


async def next_data_event(lines) -> dict:
    async for line in lines:
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError("the event stream ended")


async def first_audio_frame(ws: ClientConnection) -> None:
    while not isinstance(await ws.recv(), bytes):
        pass


@pytest.fixture(scope="module")
def gateway(checkpoint_dirs) -> Iterator[LiveGateway]:
    with live_gateway(checkpoint_dirs["custom_voice"]) as running:
        yield running


@pytest.fixture(scope="module")
def idle_gateway(checkpoint_dirs) -> Iterator[LiveGateway]:
    env = {"IDLE_TIMEOUT": "2", "API_KEY": API_KEY, "SHUTDOWN_GRACE": "120", "LOG_FORMAT": "text"}
    with live_gateway(checkpoint_dirs["custom_voice"], env=env) as running:
        yield running


def test_gateway_imports_nothing_heavy():  # httpx too: it is loaded with the first worker
    code = (
        "import sys, qwen3_tts_server.gateway.main; "
        "heavy = {'torch', 'numpy', 'fastapi', 'pydantic', 'pydantic_settings', 'httpx'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_invalid_setting_exits_2_naming_the_variable():
    command = [sys.executable, "-m", "qwen3_tts_server", "gateway", "--port", "not-a-port"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2
    assert "PORT" in result.stderr


def test_listens_on_a_unix_socket(tmp_path):
    socket_path = tmp_path / "gateway.sock"
    command = [sys.executable, "-m", "qwen3_tts_server", "gateway", "--uds", str(socket_path)]
    gateway = subprocess.Popen(command, env={**os.environ, "DATA_DIR": str(tmp_path)})
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)), timeout=TIMEOUT) as client:

            def ready() -> bool:
                try:
                    return client.get("http://gateway/ready").status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(ready, 120, "the gateway listens")
            health = client.get("http://gateway/health").json()
        assert health["gateway"]["pid"] == gateway.pid
        assert health["gateway"]["worker"] == "stopped"
    finally:
        gateway.terminate()
        assert gateway.wait(timeout=60) == 0


def test_worker_that_cannot_start_fails_requests_with_503(tmp_path):
    with live_gateway(tmp_path / "no-such-checkpoint") as broken:

        async def requests() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=broken.base, timeout=TIMEOUT) as client:
                return await asyncio.gather(*(client.get("/v1/models") for _ in range(3)))

        for response in asyncio.run(requests()):
            assert response.status_code == 503
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["code"] == "worker_unavailable" and "exited" in error["message"]
        health = broken.health()["gateway"]
        assert health["starts"] == 1  # the concurrent requests shared the one failed start
        assert health["worker"] == "stopped"


def test_concurrent_cold_start_shares_one_worker(gateway):
    cold = gateway.health()
    assert cold["gateway"]["worker"] == "stopped"
    # The earlier server's flat keys: before the worker starts, no model and nothing waiting (its scripts read them).
    assert (cold["model_loaded"], cold["model_id"], cold["queue_depth"], cold["max_queue_depth"]) == (
        False,
        None,
        0,
        64,
    )

    async def requests() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=gateway.base, timeout=TIMEOUT) as client:
            return await asyncio.gather(*(client.post(SPEECH, json=speech()) for _ in range(4)))

    for response in asyncio.run(requests()):
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("audio/wav")
        audio, rate = sf.read(io.BytesIO(response.content))
        assert rate == 24000 and len(audio) > 0
    health = gateway.health()
    assert health["gateway"]["starts"] == 1
    assert health["gateway"]["worker"] == "running"
    assert health["worker"]["pid"] == health["gateway"]["worker_pid"]
    assert health["model_loaded"] is True and health["voices"] == health["worker"]["voices"], "the worker's keys"
    logged = [json.loads(line) for line in gateway.log_tail(200_000).splitlines() if '"msg": "request"' in line]
    proxied = [entry for entry in logged if entry["path"] == SPEECH]
    assert len(proxied) == 4
    assert all(entry["method"] == "POST" and entry["status"] == 200 and entry["request_id"] for entry in proxied)
    assert all(entry["ms"] > 0 and entry["level"] == "INFO" and entry["ts"] for entry in proxied)


def test_gateway_process_stays_without_torch(gateway):
    gateway.health()  # the worker runs by now or soon: the gateway process must still be light
    maps = Path(f"/proc/{gateway.process.pid}/maps").read_text()
    assert "libtorch" not in maps
    assert gateway.health()["gateway"]["rss_bytes"] < 80 << 20


def test_first_chunk_arrives_while_the_worker_still_generates(gateway):
    body = speech(LONG_TEXT, response_format="pcm", stream=True, seed=0)  # seeded: no early stop by chance
    with httpx.stream("POST", gateway.base + SPEECH, json=body, timeout=TIMEOUT) as response:
        assert response.status_code == 200
        assert "content-length" not in response.headers
        chunks = response.iter_raw()  # kept: a dropped iterator would close the response
        assert next(chunks)
        health = gateway.health()
        assert health["gateway"]["in_flight"] == 1
        assert health["worker"]["active_streams"] + health["worker"]["queue_depth"] >= 1
    # The client left early: the gateway drops its upstream request, and the worker its stream.
    wait_for(lambda: gateway.health()["worker"]["active_streams"] == 0, 60, "the worker dropped the stream")
    assert gateway.health()["gateway"]["in_flight"] == 0


def test_sse_events_pass_through(gateway):
    body = speech("Hi.", response_format="pcm", stream=True, stream_format="sse")

    async def events() -> list[dict]:
        async with (
            httpx.AsyncClient(base_url=gateway.base, timeout=TIMEOUT) as client,
            client.stream("POST", SPEECH, json=body) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            return await data_events(response.aiter_lines())

    types = [event["type"] for event in asyncio.run(events())]
    assert len(types) >= 2
    assert set(types[:-1]) == {"speech.audio.delta"}
    assert types[-1] == "speech.audio.done"


def test_websocket_round_trip(gateway):
    async def conversation() -> tuple[list[dict], bytes]:
        events, audio = [], b""
        async with connect(ws_url(gateway)) as ws:
            await ws.send(json.dumps({"type": "input_text", "text": "Hello there."}))
            async for message in ws:
                if isinstance(message, bytes):
                    audio += message
                    continue
                events.append(json.loads(message))
                if events[-1]["type"] in ("done", "error"):
                    break
        return events, audio

    events, audio = asyncio.run(asyncio.wait_for(conversation(), TIMEOUT))
    assert [event["type"] for event in events] == ["segment.start", "segment.end", "done"]
    assert audio and len(audio) % PCM_FRAME_BYTES == 0


def test_worker_killed_mid_stream(gateway):
    before = gateway.health()["gateway"]
    pid = before["worker_pid"]
    assert before["worker"] == "running"

    async def killed_streams() -> tuple[list[dict], list, type[Exception] | None]:
        async with (
            httpx.AsyncClient(base_url=gateway.base, timeout=TIMEOUT) as client,
            connect(ws_url(gateway)) as ws,
        ):
            await ws.send(json.dumps({"type": "input_text", "text": LONG_TEXT}))
            await first_audio_frame(ws)
            sse_body = speech(LONG_TEXT, response_format="pcm", stream=True, stream_format="sse", seed=1)
            pcm_body = speech(LONG_TEXT, response_format="pcm", stream=True, seed=2)
            async with (
                client.stream("POST", SPEECH, json=sse_body) as sse,
                client.stream("POST", SPEECH, json=pcm_body) as pcm,
            ):
                lines = sse.aiter_lines()
                assert (await next_data_event(lines))["type"] == "speech.audio.delta"
                chunks = pcm.aiter_raw()
                assert await anext(chunks)
                os.kill(pid, signal.SIGKILL)
                sse_rest = await data_events(lines)
                pcm_error = None
                try:
                    async for _ in chunks:
                        pass
                except httpx.HTTPError as exc:
                    pcm_error = type(exc)
            ws_rest = []
            try:
                async for message in ws:
                    ws_rest.append(message if isinstance(message, bytes) else json.loads(message))
            except ConnectionClosed:
                pass
            ws_rest.append(ws.close_code)
            return sse_rest, ws_rest, pcm_error

    sse_rest, ws_rest, pcm_error = asyncio.run(asyncio.wait_for(killed_streams(), TIMEOUT))
    assert sse_rest[-1]["type"] == "error"
    assert sse_rest[-1]["error"]["code"] == "worker_lost"
    assert pcm_error is not None, "a raw stream cut by the crash must not end like a complete one"
    assert ws_rest[-1] == 1011
    assert ws_rest[-2]["type"] == "error"
    wait_for(lambda: process_gone(pid), 10, "the killed worker was reaped")
    assert gateway.health()["gateway"]["worker"] == "stopped"

    response = httpx.post(gateway.base + SPEECH, json=speech("Hi."), timeout=TIMEOUT)
    assert response.status_code == 200
    after = gateway.health()["gateway"]
    assert after["restarts"] == before["restarts"] + 1
    assert after["starts"] == before["starts"] + 1
    assert after["worker_pid"] != pid


def test_api_key_checked_before_a_worker_starts(idle_gateway):
    for headers in ({}, {"xi-api-key": "wrong"}, {"X-API-Key": "wrong"}):
        response = httpx.post(idle_gateway.base + SPEECH, json=speech(), headers=headers, timeout=TIMEOUT)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"

    async def refused_websocket() -> int | None:
        async with connect(ws_url(idle_gateway)) as ws:
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            return ws.close_code

    assert asyncio.run(refused_websocket()) == 1008
    assert idle_gateway.health()["gateway"]["starts"] == 0


def test_idle_worker_is_stopped_and_started_again(idle_gateway):
    response = httpx.post(idle_gateway.base + SPEECH, json=speech("Hi."), headers=AUTH, timeout=TIMEOUT)
    assert response.status_code == 200
    health = idle_gateway.health()["gateway"]
    pid, starts = health["worker_pid"], health["starts"]
    running = scrape(idle_gateway)
    assert running["qwen3_tts_gateway_worker_up"] == 1 and running["qwen3_tts_requests_total"] >= 1

    def stopped() -> bool:  # scraped all the while: a scrape keeps no worker alive
        scrape(idle_gateway)
        return idle_gateway.health()["gateway"]["worker"] == "stopped"

    wait_for(stopped, 30, "the idle worker stopped")
    assert process_gone(pid)
    assert idle_gateway.health()["worker"] is None
    scraped = scrape(idle_gateway)  # nor starts one
    assert scraped["qwen3_tts_gateway_worker_up"] == 0 and scraped["qwen3_tts_gateway_worker_starts_total"] == starts
    assert "qwen3_tts_requests_total" not in scraped

    cartesias = {"X-API-Key": API_KEY}  # the key as Cartesia's clients send it
    response = httpx.post(idle_gateway.base + SPEECH, json=speech("Hi."), headers=cartesias, timeout=TIMEOUT)
    assert response.status_code == 200
    health = idle_gateway.health()["gateway"]
    assert health["starts"] == starts + 1
    assert health["restarts"] == 0


def test_websocket_key_in_the_query_reaches_the_worker(idle_gateway):
    async def session_update() -> dict:
        async with connect(ws_url(idle_gateway) + f"?api_key={API_KEY}") as ws:
            await ws.send(json.dumps({"type": "session.update", "voice": "alloy"}))
            return json.loads(await ws.recv())

    assert asyncio.run(asyncio.wait_for(session_update(), TIMEOUT))["type"] == "session.updated"


def test_sigterm_lets_a_streamed_request_finish(idle_gateway):
    body = speech("Hello there, how are you?", response_format="pcm", stream=True)
    with httpx.stream("POST", idle_gateway.base + SPEECH, json=body, headers=AUTH, timeout=TIMEOUT) as response:
        assert response.status_code == 200
        chunks = response.iter_raw()
        received = len(next(chunks))
        pid = idle_gateway.health()["gateway"]["worker_pid"]
        idle_gateway.process.send_signal(signal.SIGTERM)
        received += sum(len(chunk) for chunk in chunks)  # raises if the stream is cut short
    assert received > 0 and received % PCM_FRAME_BYTES == 0
    assert idle_gateway.process.wait(timeout=60) == 0
    assert process_gone(pid)


def test_serve_with_gateway_mode_runs_the_gateway(checkpoint_dirs):
    """The container's `serve` with GATEWAY_MODE=true: the same process becomes the light gateway."""
    with live_process("serve", checkpoint_dirs["custom_voice"], env={"GATEWAY_MODE": "true"}) as served:
        health = served.health()
        title = Path(f"/proc/{served.process.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert health["gateway"]["pid"] == served.process.pid and health["gateway"]["worker"] == "stopped"
    assert title.startswith("qwen3-tts-server gateway")


def test_a_transcription_streams_through_the_gateway_as_from_the_server(both_families):
    """MODELS with a transcriber: the worker the gateway starts hosts it, and a streamed upload's events pass
    through one by one; the text is the one the transcriber gives offline."""
    from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
    from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave
    from qwen3_tts_server.testing.signals import voiced_glide

    buffer = io.BytesIO()
    sf.write(buffer, voiced_glide(1.0, 16000, pitch=140.0), 16000, format="WAV")
    clip = buffer.getvalue()
    (expected,) = Transcriber(load_asr_checkpoint(both_families["asr"])).transcribe([heard_wave(clip, "clip")])

    async def events(base: str) -> list[dict]:
        async with (
            httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as client,
            client.stream(
                "POST", "/v1/audio/transcriptions", data={"stream": "true"}, files={"file": ("clip.wav", clip)}
            ) as response,
        ):
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            return await data_events(response.aiter_lines())

    with live_gateway(both_families["speech"], "--model", str(both_families["asr"])) as running:
        *deltas, done = asyncio.run(events(running.base))
    assert deltas and {event["type"] for event in deltas} == {"transcript.text.delta"}
    assert done["type"] == "transcript.text.done" and done["text"] == expected.text
