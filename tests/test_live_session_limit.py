"""LIVE_MAX_SESSIONS on a live server (tiny models, a limit of one): while one live session runs, a new one is
refused on every live protocol as its clients see it (`WS /ws/transcribe`: the earlier server's error frame, then
close 1013; the realtime route: an `error` event, then close 1013; Wyoming: an `error` event, the rest of that
audio dropped, the connection going on); once the session ends, its slot serves the next one. `/metrics` counts
the open sessions."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from qwen3_tts_server.testing.live_server import free_port, live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import ENV
from test_wyoming import read_until

TIMEOUT = 60
PCM = (voiced_glide(1.0, pitch=150.0) * 32767).astype("<i2").tobytes()  # 1 s at 16 kHz


@pytest.fixture(scope="module")
def limited(both_families):
    port = free_port()
    asr = ("--model", str(both_families["asr"]), "--wyoming-port", str(port))
    with live_process("serve", both_families["speech"], *asr, env={**ENV, "LIVE_MAX_SESSIONS": "1"}) as live:
        yield live.base, port, both_families["asr"].name


def wyoming_utterance() -> list:
    audio = AudioChunk(rate=16000, width=2, channels=1, audio=PCM).event()
    return [Transcribe().event(), AudioStart(rate=16000, width=2, channels=1).event(), audio, AudioStop().event()]


async def refused_frames(url: str) -> tuple[list[dict], int]:
    """What a refused WebSocket receives before the server closes it, and its close code."""
    frames = []
    async with connect(url) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
    assert closed.value.rcvd is not None
    return frames, closed.value.rcvd.code


async def once_free(attempt):
    """`attempt()`'s answer, retried while it says the slot is still held: a session's slot is given back just
    after its client has seen it end (the close handshake, the transcript), so a new session may come a moment too
    early."""
    for _ in range(50):
        answer, refused = await attempt()
        if not refused:
            return answer
        await asyncio.sleep(0.2)
    raise AssertionError("the ended session's slot was never given back")


async def greeting(url: str) -> tuple[dict, bool]:
    async with connect(url) as ws:
        frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    return frame, frame.get("code") == "LIVE_SESSION_LIMIT"


async def transcribed(wyoming: AsyncTcpClient) -> tuple[list, bool]:
    for event in wyoming_utterance():
        await wyoming.write_event(event)
    events = await read_until(wyoming, "transcript-stop", "error")
    return events, events[-1].type == "error" and events[-1].data["code"] == "live_session_limit"


def test_past_the_limit_every_live_protocol_refuses_until_a_session_ends(limited):
    base, wyoming_port, model = limited
    ws_base = base.replace("http", "ws", 1)
    gauge = f'qwen3_tts_live_sessions{{model="{model}"}}'
    transcribe = f"{ws_base}/ws/transcribe?use_server_vad=false"
    realtime = f"{ws_base}/v1/realtime?intent=transcription"

    async def scenario():
        async with AsyncTcpClient("127.0.0.1", wyoming_port) as wyoming:
            async with connect(transcribe) as held, httpx.AsyncClient(base_url=base) as http:
                assert json.loads(await held.recv())["status"] == "connected"
                open_sessions = (await http.get("/metrics")).text
                earlier = await refused_frames(transcribe)
                openai = await refused_frames(realtime)
                for event in wyoming_utterance():
                    await wyoming.write_event(event)
                home_assistant = await read_until(wyoming, "error")
                await held.send(PCM)
                await held.send(json.dumps({"action": "flush"}))
                while not json.loads(await asyncio.wait_for(held.recv(), TIMEOUT))["is_final"]:
                    pass
            after = await once_free(lambda: transcribed(wyoming))  # the same connection: it went on
            greeted = await once_free(lambda: greeting(transcribe))
            async with httpx.AsyncClient(base_url=base) as http:

                async def scraped() -> tuple[str, bool]:
                    text = (await http.get("/metrics")).text
                    return text, f"{gauge} 0.0" not in text.splitlines()

                none_open = await once_free(scraped)
            return earlier, openai, home_assistant, greeted, after, open_sessions, none_open

    earlier, openai, home_assistant, greeted, after, open_sessions, none_open = asyncio.run(scenario())
    (frame,), code = earlier
    assert code == 1013 and frame["code"] == "LIVE_SESSION_LIMIT" and frame["statusCode"] == 503
    assert "1 live session at once (LIVE_MAX_SESSIONS)" in frame["message"]
    (event,), code = openai
    assert code == 1013 and event["type"] == "error"
    assert event["error"]["type"] == "server_error" and event["error"]["code"] == "live_session_limit"
    assert home_assistant[-1].data["code"] == "live_session_limit"
    assert greeted["status"] == "connected"
    assert [event.type for event in after][-2:] == ["transcript", "transcript-stop"]
    assert f"{gauge} 1.0" in open_sessions.splitlines() and f"{gauge} 0.0" in none_open.splitlines()  # 0 at last
