"""WS /ws/transcribe as the earlier ASR server's clients use it, with raw websockets against a live server hosting a
tiny transcriber: the greeting, partials that are the official streaming algorithm's texts, exactly one final per
flush, 8 kHz telephony audio, its actions and their replies, finals where speech stops with server voice activity
(espeak-ng speech), and errors as error frames."""

from __future__ import annotations

import asyncio
import json

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from live_cases import pass_by_pass
from qwen3_tts_server.api.recognition.live import LIVE_TRANSCRIBE
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import server, transcriber  # noqa: F401 (fixtures)
from test_voice_activity import conversation  # noqa: F401 (a fixture)

TIMEOUT = 120


def pcm(wave: np.ndarray) -> bytes:
    return (np.clip(wave, -1, 1) * 32767).astype("<i2").tobytes()


def ws_url(live, query: str = "") -> str:
    return live.base.replace("http", "ws", 1) + "/ws/transcribe" + (f"?{query}" if query else "")


def frame_name(frame: dict) -> str:
    """What tells a frame apart, as the protocol's declaration names it."""
    if "status" in frame:
        return json.dumps({"status": frame["status"]})
    if "code" in frame:
        return '{"code": ...}'
    return '{"is_final": true}' if frame.get("is_final") else '{"is_partial": true}'


async def receive(ws: ClientConnection) -> dict:
    frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    assert frame_name(frame) in LIVE_TRANSCRIBE.sent_by("server"), frame  # declared (the protocol reference)
    return frame


async def until_final(ws: ClientConnection) -> list[dict]:
    frames = [await receive(ws)]
    while not frames[-1].get("is_final"):
        frames.append(await receive(ws))
    return frames


def streamed_texts(model: Transcriber, data: bytes) -> list[str]:
    """The official algorithm's text after each pass over the same 16-bit samples, run at the model layer."""
    return pass_by_pass(model, np.frombuffer(data, "<i2").astype(np.float32) / 32768.0)


def test_partials_and_one_final_per_flush_are_the_streaming_algorithms_texts(server, transcriber):  # noqa: F811
    data = pcm(voiced_glide(5.0, pitch=140.0))
    expected = streamed_texts(transcriber, data)

    async def scenario():
        async with connect(ws_url(server, "use_server_vad=false")) as ws:
            greeting = await receive(ws)
            for start in range(0, len(data), 3201):  # odd frame sizes: samples split across frames
                await ws.send(data[start : start + 3201])
            await ws.send(json.dumps({"action": "flush"}))
            heard = await until_final(ws)
            await ws.send(json.dumps({"action": "flush"}))  # nothing held: still exactly one final
            empty = await until_final(ws)
            return greeting, heard, empty

    greeting, heard, empty = asyncio.run(scenario())
    assert greeting == {
        "status": "connected",
        "sample_rate": 16000,
        "format": "pcm_s16le",
        "use_server_vad": False,
        "buffer_size": 64000,
        "window_max_s": 1200.0,  # no audio of an utterance dropped before the longest the model transcribes at once
    }
    assert [frame["is_partial"] for frame in heard] == [True, True, False]
    assert [frame["text"] for frame in heard] == expected and all(expected)
    assert empty == [{"text": "", "is_partial": False, "is_final": True}]


def test_telephony_audio_and_the_actions_as_the_earlier_server_answered_them(server):  # noqa: F811
    async def scenario():
        async with connect(ws_url(server, "sample_rate=8000&use_server_vad=false")) as ws:
            replies = [await receive(ws)]
            for action in (
                {"action": "config", "language": "en", "use_server_vad": "false"},
                {"action": "config", "language": "xx"},
                {"action": "reset"},
                {"action": "rewind"},
            ):
                await ws.send(json.dumps(action))
                replies.append(await receive(ws))
            for text in ("not json", "[1]"):
                await ws.send(text)
                replies.append(await receive(ws))
            await ws.send(pcm(voiced_glide(2.5, 8000, pitch=160.0)))
            await ws.send(json.dumps({"action": "flush"}))
            return replies, await until_final(ws)

    replies, heard = asyncio.run(scenario())
    greeting, english, unknown_language, reset, rewind, not_json, not_object = replies
    assert greeting["sample_rate"] == 8000 and greeting["buffer_size"] == 32000
    assert english == {"status": "configured", "language": "en", "use_server_vad": False}
    assert unknown_language["statusCode"] == 400 and "unsupported language 'xx'" in unknown_language["message"]
    assert reset == {"status": "buffer_reset"}
    assert rewind == {"code": "UNKNOWN_ACTION", "message": "Unknown action: 'rewind'", "statusCode": 400}
    assert not_json["code"] == not_object["code"] == "INVALID_JSON"
    assert [frame["is_final"] for frame in heard] == [False, True] and heard[-1]["text"]


def test_server_voice_activity_sends_a_final_where_speech_stops(server, conversation):  # noqa: F811
    wave, _ = conversation
    data = pcm(wave)

    async def scenario():
        async with connect(ws_url(server)) as ws:  # voice activity on: the server's default
            greeting = await receive(ws)
            for start in range(0, len(data), 3200):  # 100 ms frames, faster than real time
                await ws.send(data[start : start + 3200])
            return greeting, await until_final(ws), await until_final(ws)

    greeting, first, second = asyncio.run(scenario())
    assert greeting["use_server_vad"] is True
    assert first[-1]["text"] and second[-1]["text"]  # two sentences, two finals, no flush


def test_an_unsupported_sample_rate_is_an_error_frame_then_a_close(server):  # noqa: F811
    async def scenario():
        async with connect(ws_url(server, "sample_rate=4000")) as ws:
            return await receive(ws)

    refused = asyncio.run(scenario())
    assert refused["code"] == "UNSUPPORTED_SAMPLE_RATE" and refused["statusCode"] == 400
