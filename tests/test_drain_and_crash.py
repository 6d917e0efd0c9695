"""Faults under load, with real processes: SIGTERM to `serve` while several streams of mixed lengths are in
flight (each finishes or is cut, and the one drain line agrees with what the clients saw), and a gateway's
worker killed while streamed, whole-file, SSE and WebSocket requests are in flight (each caller gets a clean
error, and the next request starts a new worker)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from dataclasses import dataclass

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from qwen3_tts_server.testing.live_gateway import live_gateway
from qwen3_tts_server.testing.live_server import LiveProcess, free_port, live_process

SPEECH = "/v1/audio/speech"
TIMEOUT = 300
PCM_FRAME_BYTES = 1920 * 2  # 80 ms of 24 kHz 16-bit mono
# The tiny random model speaks on to each segment's frame budget, here capped by MAX_REQUEST_FRAMES: the short
# text is one segment, the long one nine, far past the grace period.
FRAME_CAP = 36
SHORT_TEXT = "Hi."
LONG_TEXT = "This stream keeps going for a good while. " * 60
MIN_GRACE = 5
# At 48 kHz a short stream (about 60 frames, 0.5 MB) is more than a client's socket takes unread: its server side
# stays in flight until its client reads. A long one (nine segments of up to 120 frames, some 8 MB) is more than the
# server's socket send buffer takes too (it grows to 4 MB on loopback): it cannot end before its client reads.
DRAIN_RATE = 48000
DRAIN_FRAME_CAP = 120


@dataclass
class Stream:
    request_id: str
    bytes: int = 0
    ended_at: float | None = None  # monotonic time the client saw the end, complete or cut
    error: Exception | None = None  # the connection ended before the response was complete


def log_records(live: LiveProcess) -> list[dict]:
    return [json.loads(line) for line in live.log_path.read_text().splitlines() if line.strip()]


async def pcm_stream(
    client: httpx.AsyncClient,
    stream: Stream,
    text: str,
    seed: int,
    started: asyncio.Event,
    resume: asyncio.Event | None = None,
    **fields,
) -> None:
    """Read a raw PCM stream; with `resume`, stop reading after the first piece until it is set."""
    body = {"voice": "alloy", "input": text, "response_format": "pcm", "stream": True, "seed": seed, **fields}
    try:
        async with client.stream("POST", SPEECH, json=body, headers={"X-Request-Id": stream.request_id}) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                stream.bytes += len(chunk)
                started.set()
                if resume is not None:
                    await resume.wait()
    except httpx.HTTPError as exc:
        stream.error = exc
    stream.ended_at = time.monotonic()
    started.set()


def grace_for_short_streams(checkpoint) -> float:
    """A grace period the short streams' generation fits in, busy machine or not: three times what the drain's own
    load takes on this machine now, on a fresh server as the drain's is (its first batch of six rows included): the
    three short requests, sent once three long streams are under way. A single request's speed said too little: on
    two cores six rows step some four times slower a frame than one, and the first batch of a row count is slower
    still."""
    env = {"MAX_REQUEST_FRAMES": str(DRAIN_FRAME_CAP), "AUDIO_CACHE_MAX": "0"}

    async def probe(base: str) -> float:
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as client:
            started = [asyncio.Event() for _ in range(3)]
            long_ones = [
                asyncio.create_task(
                    pcm_stream(client, Stream(f"probe-{n}"), LONG_TEXT, n, event, sample_rate=DRAIN_RATE)
                )
                for n, event in enumerate(started)
            ]
            await asyncio.gather(*(event.wait() for event in started))
            body = {"voice": "alloy", "input": SHORT_TEXT, "response_format": "pcm", "sample_rate": DRAIN_RATE}
            began = time.monotonic()
            answers = await asyncio.gather(*(client.post(SPEECH, json={**body, "seed": n}) for n in range(3)))
            took = time.monotonic() - began
            for task in long_ones:
                task.cancel()
            await asyncio.gather(*long_ones, return_exceptions=True)
        assert all(answer.status_code == 200 for answer in answers)
        return took

    with live_process("serve", checkpoint, "--preload-model", env=env) as live:
        took = asyncio.run(asyncio.wait_for(probe(live.base), TIMEOUT))
    return max(MIN_GRACE, 3 * took)


def test_sigterm_under_load_reports_the_drain(checkpoint_dirs):
    """Every client stops reading after its first audio, so every stream is in flight at the signal whatever the
    machine's speed; the short streams' clients read on at the signal (they finish within the grace period), the
    long streams' clients only once the server has gone (they were cut at its end). The Wyoming port closes at the
    signal as the HTTP port does."""
    checkpoint = checkpoint_dirs["custom_voice"]
    grace = round(grace_for_short_streams(checkpoint), 1)
    wyoming_port = free_port()
    env = {"SHUTDOWN_GRACE": str(grace), "MAX_REQUEST_FRAMES": str(DRAIN_FRAME_CAP), "WYOMING_PORT": str(wyoming_port)}
    with live_process("serve", checkpoint, "--preload-model", env=env) as live:
        # Distinct seeds: no stream is answered from the audio cache.
        streams = [Stream(f"drain-{n}") for n in range(6)]

        async def load() -> tuple[float, float]:
            async with httpx.AsyncClient(base_url=live.base, timeout=TIMEOUT) as client:
                tasks = []
                short_resume, long_resume = asyncio.Event(), asyncio.Event()

                async def start(batch: list[Stream], text: str, resume: asyncio.Event) -> None:
                    started = [asyncio.Event() for _ in batch]
                    for seed, (stream, event) in enumerate(zip(batch, started, strict=True)):
                        reading = pcm_stream(client, stream, text, seed, event, resume, sample_rate=DRAIN_RATE)
                        tasks.append(asyncio.create_task(reading))
                    await asyncio.gather(*(event.wait() for event in started))

                await start(streams[:3], LONG_TEXT, long_resume)
                await start(streams[3:], SHORT_TEXT, short_resume)
                _, writer = await asyncio.open_connection("127.0.0.1", wyoming_port)  # open before the signal
                writer.close()
                signalled = time.monotonic()
                live.process.send_signal(signal.SIGTERM)
                short_resume.set()
                await asyncio.sleep(0.5)
                with pytest.raises(httpx.ConnectError):
                    async with httpx.AsyncClient(base_url=live.base) as fresh:
                        await fresh.get("/health")  # a new connection is refused
                with pytest.raises(ConnectionRefusedError):
                    await asyncio.open_connection("127.0.0.1", wyoming_port)  # on either port
                code = await asyncio.to_thread(live.process.wait, grace + 10)
                exited = time.monotonic()
                long_resume.set()
                await asyncio.gather(*tasks)
                assert code == 0
                return signalled, exited

        signalled, exited = asyncio.run(asyncio.wait_for(load(), TIMEOUT))
        records = log_records(live)
    assert exited - signalled < grace + 10  # the engine stops once its current step ends
    in_flight = [s for s in streams if s.ended_at > signalled]
    finished = [s for s in in_flight if s.error is None]
    cut = [s for s in in_flight if s.error is not None]
    assert [s.request_id for s in finished] == [s.request_id for s in streams[3:]], "the short streams finished"
    assert [s.request_id for s in cut] == [s.request_id for s in streams[:3]], "the long streams were cut"
    lines = {r["request_id"]: r for r in records if r.get("route") == SPEECH}
    for stream in finished:  # valid audio, all of it: as many whole frames as the server logged
        line = lines[stream.request_id]
        assert line["completed"] is True and line["frames"] * PCM_FRAME_BYTES * DRAIN_RATE // 24000 == stream.bytes > 0
    for stream in cut:
        assert lines[stream.request_id]["completed"] is False
    (drain,) = [r for r in records if r["logger"] == "qwen3_tts_server.drain"]
    assert (drain["in_flight"], drain["finished"], drain["cut"], drain["still_running"]) == (
        len(in_flight),
        len(finished),
        len(cut),
        0,
    )
    assert grace <= drain["drain_seconds"] <= exited - signalled


def test_worker_killed_under_load_behind_the_gateway(checkpoint_dirs):
    """What each caller sees when the worker dies: a whole-file request (no headers sent yet) an error envelope
    (502, worker_lost); a raw audio stream a cut connection; an SSE stream an `error` event, then its end; a
    WebSocket session an `error` event, then close code 1011. None hangs, and the next request gets a new worker."""
    env = {"MAX_REQUEST_FRAMES": str(FRAME_CAP)}
    with live_gateway(checkpoint_dirs["custom_voice"], env=env) as gateway:
        with gateway.client(timeout=TIMEOUT) as client:
            assert client.post(
                SPEECH, json={"voice": "alloy", "input": SHORT_TEXT, "response_format": "wav"}
            ).is_success
            pid = client.get("/health").json()["gateway"]["worker_pid"]

        async def load() -> dict:
            ws_url = gateway.base.replace("http://", "ws://", 1) + SPEECH + "/ws"
            seen: dict = {}
            async with httpx.AsyncClient(base_url=gateway.base, timeout=TIMEOUT) as client, connect(ws_url) as ws:
                await ws.send(json.dumps({"type": "input_text", "text": LONG_TEXT}))
                while not isinstance(await ws.recv(), bytes):
                    pass
                whole = asyncio.create_task(
                    client.post(
                        SPEECH,
                        json={
                            "voice": "alloy",
                            "input": LONG_TEXT,
                            "response_format": "wav",
                            "stream": False,
                            "seed": 3,
                        },
                    )
                )
                streams = [Stream(f"crash-{n}") for n in range(2)]
                started = [asyncio.Event() for _ in streams]
                raw = [
                    asyncio.create_task(pcm_stream(client, stream, LONG_TEXT, seed, event))
                    for seed, (stream, event) in enumerate(zip(streams, started, strict=True))
                ]
                sse_body = {"voice": "alloy", "input": LONG_TEXT, "response_format": "pcm", "stream_format": "sse"}
                async with client.stream("POST", SPEECH, json=sse_body) as sse:
                    lines = sse.aiter_lines()
                    async for line in lines:
                        if line.startswith("data:"):
                            break
                    await asyncio.gather(*(event.wait() for event in started))
                    os.kill(pid, signal.SIGKILL)
                    seen["sse"] = [json.loads(line[5:]) async for line in lines if line.startswith("data:")]
                await asyncio.gather(*raw)
                seen["raw"] = streams
                seen["whole"] = await whole
                seen["ws"] = []
                try:
                    async for message in ws:
                        seen["ws"].append(message if isinstance(message, bytes) else json.loads(message))
                except ConnectionClosed:
                    pass
                seen["ws_code"] = ws.close_code
            return seen

        seen = asyncio.run(asyncio.wait_for(load(), 120))  # never a hang
        with gateway.client(timeout=TIMEOUT) as client:
            after = client.post(SPEECH, json={"voice": "alloy", "input": SHORT_TEXT, "response_format": "wav"})
            health = client.get("/health").json()["gateway"]
    assert seen["sse"][-1]["type"] == "error" and seen["sse"][-1]["error"]["code"] == "worker_lost"
    # A cut chunked body: a protocol error, or a read error when the reset comes first.
    assert all(isinstance(stream.error, httpx.RemoteProtocolError | httpx.ReadError) for stream in seen["raw"])
    assert seen["whole"].status_code == 502 and seen["whole"].json()["error"]["code"] == "worker_lost"
    assert seen["ws_code"] == 1011 and seen["ws"][-1]["type"] == "error"
    assert after.status_code == 200 and after.content[:4] == b"RIFF"
    assert health["worker_pid"] != pid and health["restarts"] == 1
