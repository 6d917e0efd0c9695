"""What kept live transcription locked (a live server, a tiny transcriber, LIVE_MAX_SESSIONS=1 and
LIVE_IDLE_TIMEOUT=2): a client that drops its connection mid-stream gives its slot back at once, the audio it had
queued never transcribed; a client that sends nothing is closed after the idle timeout with its protocol's error
and close 1001 (`WS /ws/transcribe` and the realtime route), its slot serving the next, while one that keeps sending,
even silence, is not; a Wyoming utterance whose audio stops before its audio-stop is dropped with an error, the
connection going on."""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from qwen3_tts_server.testing.live_server import free_port, live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_live_session_limit import greeting, once_free, transcribed
from test_transcription_api import ENV
from test_wyoming import read_until

TIMEOUT = 60
IDLE = 2.0  # LIVE_IDLE_TIMEOUT
AUDIO = (voiced_glide(25.0, pitch=150.0) * 32767).astype("<i2").tobytes()  # 16 kHz: many passes' work


@pytest.fixture(scope="module")
def one_slot(both_families):
    env = {**ENV, "LIVE_MAX_SESSIONS": "1", "LIVE_IDLE_TIMEOUT": str(IDLE)}
    port = free_port()
    asr = ("--model", str(both_families["asr"]), "--wyoming-port", str(port))
    with live_process("serve", both_families["speech"], *asr, env=env) as live:
        yield live.base, both_families["asr"].name, port


async def closing_frames(ws: ClientConnection) -> tuple[list[dict], int]:
    """What `ws` receives until the server closes it, and the close code."""
    frames = []
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
    assert closed.value.rcvd is not None
    return frames, closed.value.rcvd.code


def test_a_client_that_drops_mid_stream_gives_its_slot_back_and_its_audio_is_dropped(one_slot):
    base, model, _ = one_slot
    url = base.replace("http", "ws", 1) + "/ws/transcribe?use_server_vad=false"
    steps = re.compile(rf'^qwen3_tts_engine_step_seconds_count\{{model="{model}"\}} (\S+)$', re.MULTILINE)

    async def engine_steps(http: httpx.AsyncClient) -> float:
        found = steps.search((await http.get("/metrics")).text)
        return float(found.group(1)) if found else 0.0  # (none before the first)

    async def scenario():
        async with httpx.AsyncClient(base_url=base) as http:
            dropped = await connect(url)
            await dropped.recv()  # the greeting
            for start in range(0, len(AUDIO), 6400):
                await dropped.send(AUDIO[start : start + 6400])
            await dropped.send(json.dumps({"action": "config"}))  # answered once all that audio is queued
            seen, deadline = set(), time.monotonic() + TIMEOUT
            while not {"configured", "partial"} <= seen:  # ... and its passes under way
                assert time.monotonic() < deadline
                try:
                    frame = json.loads(await asyncio.wait_for(dropped.recv(), IDLE / 4))
                except asyncio.TimeoutError:  # a streaming client sends on (a sample of silence): not idle
                    await dropped.send(bytes(2))
                    continue
                seen.add("partial" if frame.get("is_partial") else frame.get("status"))
            at_drop = await engine_steps(http)
            dropped.transport.abort()  # the TCP connection drops: no close handshake
            gone = time.monotonic()
            answer, refused = await greeting(url)
            while refused and time.monotonic() - gone < 3:  # the server sees the drop a moment later
                await asyncio.sleep(0.1)
                answer, refused = await greeting(url)
            served_after = time.monotonic() - gone
            await asyncio.sleep(3.0)
            return answer, served_after, at_drop, await engine_steps(http)

    answer, served_after, at_drop, after = asyncio.run(scenario())
    assert answer["status"] == "connected" and served_after < 3  # 25 s of queued audio would take far longer
    # the pass under way ends within a step or so (the engine frees a cancelled row there), and none of the later
    # ones runs: each is dozens of steps (a token each), the rest of the audio hundreds
    assert at_drop > 0 and after - at_drop < 20


def test_a_silent_client_is_closed_when_idle_and_a_sending_one_is_not(one_slot):
    base, *_ = one_slot
    ws_base = base.replace("http", "ws", 1)
    transcribe = f"{ws_base}/ws/transcribe?use_server_vad=false"

    async def sending(url: str) -> tuple[dict, bool]:
        """A client streaming as a phone bridge does, a frame of silence every half second, for twice the idle
        timeout, then `flush`; it streams on until the final comes."""
        async with connect(url) as ws:
            greeted = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            if greeted.get("code") == "LIVE_SESSION_LIMIT":
                return greeted, True
            for _ in range(round(4 * IDLE)):
                await ws.send(bytes(1600))  # 50 ms of silence
                await asyncio.sleep(0.5)
            await ws.send(json.dumps({"action": "flush"}))
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
                except asyncio.TimeoutError:
                    await ws.send(bytes(1600))
                    continue
                if frame.get("is_final"):
                    return frame, False
            raise AssertionError("no final")

    async def silent_realtime() -> tuple[tuple[list[dict], int] | dict, bool]:
        async with connect(f"{ws_base}/v1/realtime?intent=transcription") as silent:
            created = json.loads(await asyncio.wait_for(silent.recv(), TIMEOUT))
            if created["type"] == "error":  # the last session's slot, given back a moment after its close
                return created, True
            return await closing_frames(silent), False

    async def scenario():
        started = time.monotonic()
        async with connect(transcribe) as silent:
            await silent.recv()  # the greeting
            earlier = await closing_frames(silent)
        waited = time.monotonic() - started
        final = await once_free(lambda: sending(transcribe))  # the idle session's slot serves the next
        realtime = await once_free(silent_realtime)
        return earlier, waited, final, realtime

    earlier, waited, final, realtime = asyncio.run(scenario())
    (frame,), code = earlier
    assert code == 1001 and frame["code"] == "IDLE_TIMEOUT" and frame["statusCode"] == 408
    assert "LIVE_IDLE_TIMEOUT" in frame["message"] and IDLE <= waited < IDLE + 5
    assert final == {"text": final["text"], "is_partial": False, "is_final": True}
    (event,), code = realtime
    assert code == 1001 and event["type"] == "error" and event["error"]["code"] == "idle_timeout"


def test_a_wyoming_utterance_whose_audio_stops_is_dropped_and_its_slot_given_back(one_slot):
    *_, port = one_slot
    chunk = AudioChunk(rate=16000, width=2, channels=1, audio=bytes(3200)).event()

    async def scenario():
        async with AsyncTcpClient("127.0.0.1", port) as wyoming:
            for event in (Transcribe().event(), AudioStart(rate=16000, width=2, channels=1).event(), chunk):
                await wyoming.write_event(event)
            started = time.monotonic()
            dropped = await read_until(wyoming, "error")
            waited = time.monotonic() - started
            await wyoming.write_event(AudioStop().event())  # ends nothing: its error was the answer
            after = await once_free(lambda: transcribed(wyoming))  # the same connection, the slot given back
        return dropped, waited, after

    dropped, waited, after = asyncio.run(scenario())
    assert [event.type for event in dropped] == ["error"] and dropped[0].data["code"] == "idle_timeout"
    assert IDLE <= waited < IDLE + 5
    assert [event.type for event in after][-2:] == ["transcript", "transcript-stop"]
