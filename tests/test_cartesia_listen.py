"""Cartesia's listening sockets on a live server hosting a tiny transcriber, its key required: the plugins
themselves, unchanged, with their base URL set to the server (livekit-plugins-cartesia 1.8.9 `stt.py` and
`_recognize_streams/`: `ink-whisper` over /stt/websocket, `finalize` at a flush and `close` at the end; `ink-2`, its
English default, over /stt/turns/websocket; pipecat-ai 1.14.0 `services/cartesia/stt.py`: `CartesiaSTTService`,
`finalize` when the user stops speaking), then raw messages as they send them. Speech is espeak-ng's: two sentences
with a pause, each an utterance of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import stt as livekit_stt
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import cartesia as livekit_cartesia
from pipecat.frames.frames import (
    InterimTranscriptionFrame,
    TranscriptionFrame,
)
from pipecat.services.cartesia.stt import CartesiaSTTService
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pipecat_pipeline import heard
from provider_sockets import exchange, pcm
from qwen3_tts_server.service.recognition.cartesia import CARTESIA_STT_SOCKET, CARTESIA_TURNS_SOCKET
from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from test_voice_activity import conversation  # noqa: F401 (a fixture)

KEY = "cartesia-test-key"
ENV = {"TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0", "API_KEY": KEY}
HEADERS = {"X-API-Key": KEY, "Cartesia-Version": "2025-04-16"}
RATE = 16000
TIMEOUT = 300  # a guard against a hang, not a speed limit
KIND = livekit_stt.SpeechEventType


@pytest.fixture(scope="module")
def server(both_families) -> Iterator[LiveProcess]:
    with live_process("serve", both_families["asr"], "--preload-model", env=ENV) as live:
        yield live


def socket_url(server: LiveProcess, path: str, query: str = "model=ink-whisper&encoding=pcm_s16le&sample_rate=16000"):
    return server.base.replace("http://", "ws://") + path + "?" + query


def livekit_events(server: LiveProcess, wave: np.ndarray, model: str) -> list[livekit_stt.SpeechEvent]:
    """LiveKit's stream fed `wave` in 100 ms frames, five times real time, then flushed and ended: its events."""
    audio = pcm(wave)

    async def scenario():
        async with livekit_http.open():
            stt = livekit_cartesia.STT(model=model, api_key=KEY, base_url=server.base, language="en")
            stream = stt.stream()
            step = RATE // 10
            for start in range(0, len(wave), step):
                chunk = audio[2 * start : 2 * (start + step)]
                stream.push_frame(rtc.AudioFrame(chunk, RATE, 1, len(chunk) // 2))
                await asyncio.sleep(0.02)
            stream.flush()
            stream.end_input()
            events = [event async for event in stream]
            await stt.aclose()
            return [event for event in events if event.type != KIND.RECOGNITION_USAGE]

    return asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))


def collapsed(events: list[livekit_stt.SpeechEvent]) -> list[KIND]:
    kinds = [event.type for event in events]
    return [kind for index, kind in enumerate(kinds) if index == 0 or kinds[index - 1] != kind]


@pytest.mark.parametrize("model", ["ink-whisper", "ink-2"])
def test_livekits_stream_gets_a_start_interims_a_final_and_an_end_for_each_utterance(server, conversation, model):  # noqa: F811
    """`ink-whisper` over /stt/websocket (its finals timed by their words), `ink-2` over the turns socket."""
    wave, spans = conversation
    events = livekit_events(server, wave, model)
    turn = [KIND.START_OF_SPEECH, KIND.INTERIM_TRANSCRIPT, KIND.FINAL_TRANSCRIPT, KIND.END_OF_SPEECH]
    assert collapsed(events) == turn * 2
    finals = [event.alternatives[0] for event in events if event.type == KIND.FINAL_TRANSCRIPT]
    assert all(final.text for final in finals)
    if model == "ink-whisper":
        for (start, end), final in zip(spans, finals, strict=True):
            assert start - 0.5 <= final.words[0].start_time <= final.words[-1].end_time <= end + 1.0


def test_the_socket_answers_finalize_with_the_final_then_flush_done_and_done_at_the_end(server, conversation):  # noqa: F811
    """A sentence cut short by `finalize` before its silence: its final at once, then `flush_done`; `done` sends
    `done` and closes; a frame split across two messages is joined; every message is listed in the protocol."""
    wave, spans = conversation
    audio = pcm(wave[: int((spans[0][1] - 0.3) * RATE)])
    pieces = [audio[start : start + 3201] for start in range(0, len(audio), 3201)]
    messages, code = asyncio.run(exchange(socket_url(server, "/stt/websocket"), HEADERS, [*pieces, "finalize", "done"]))
    assert code == 1000 and {message["type"] for message in messages} <= CARTESIA_STT_SOCKET.sent_by("server")
    kinds = [(message["type"], message.get("is_final")) for message in messages]
    assert kinds[-3:] == [("transcript", True), ("flush_done", None), ("done", None)]
    assert set(kinds[:-3]) == {("transcript", False)}
    final = messages[-3]
    assert final["text"] and len({message["request_id"] for message in messages}) == 1
    assert final["words"][0]["start"] == pytest.approx(spans[0][0], abs=0.5)
    # the durations add up to where the audio heard ends, as LiveKit adds them up
    total = sum(message["duration"] for message in messages if message["type"] == "transcript")
    assert total == pytest.approx(final["words"][-1]["end"], abs=0.01)


def test_the_turns_socket_greets_then_turns_and_closes_on_close(server, conversation):  # noqa: F811
    wave, _ = conversation
    audio = pcm(wave)
    pieces = [audio[start : start + 6400] for start in range(0, len(audio), 6400)]
    query = "model=ink-2&encoding=pcm_s16le&sample_rate=16000&turn_end_threshold=0.7&keyterm=Qwen&keyterm=LiveKit"
    close = json.dumps({"type": "close"})
    messages, code = asyncio.run(exchange(socket_url(server, "/stt/turns/websocket", query), HEADERS, [*pieces, close]))
    assert code == 1000 and {message["type"] for message in messages} <= CARTESIA_TURNS_SOCKET.sent_by("server")
    kinds = [message["type"] for message in messages]
    assert kinds[0] == "connected"
    turns = [kind for index, kind in enumerate(kinds[1:]) if index == 0 or kinds[index] != kind]
    assert turns == ["turn.start", "turn.update", "turn.end"] * 2
    assert all(message["transcript"] for message in messages if message["type"] == "turn.end")


def test_other_encodings_are_taken(server, conversation):  # noqa: F811
    wave, spans = conversation
    first = wave[: int((spans[0][1] + 0.8) * RATE)]
    as_float = first.astype("<f4").tobytes()
    query = "model=ink-whisper&encoding=pcm_f32le&sample_rate=16000&max_silence_duration_secs=0.5"
    messages, _ = asyncio.run(
        exchange(socket_url(server, "/stt/websocket", query), HEADERS, [as_float[:1001], as_float[1001:], "done"])
    )
    finals = [message for message in messages if message.get("is_final")]
    assert len(finals) == 1 and finals[0]["text"]


def test_refusals_are_cartesia_errors_and_the_socket_goes_on(server):
    async def scenario(path: str, commands: list[str | bytes]) -> list[dict]:
        async with connect(socket_url(server, path), additional_headers=HEADERS) as ws:
            answers = [json.loads(await ws.recv())] if "turns" in path else []
            for command in commands:
                await ws.send(command)
                answers.append(json.loads(await ws.recv()))
            return answers

    too_much = bytes(2 * RATE * 31)  # more audio at once than a session holds waiting (30 s)
    legacy = asyncio.run(asyncio.wait_for(scenario("/stt/websocket", ["flush", too_much, "finalize"]), TIMEOUT))
    turns = asyncio.run(asyncio.wait_for(scenario("/stt/turns/websocket", ["finalize", "{not json"]), TIMEOUT))
    error, over, done = legacy
    assert over["type"] == "error" and over["error_code"] == "pending_audio_limit" and over["status_code"] == 429
    assert error["type"] == "error" and error["status_code"] == error["code"] == 400
    assert error["message"].startswith("unknown message 'flush'") and error["error_code"] == "invalid_request"
    assert done == {"type": "flush_done", "request_id": done["request_id"]}  # nothing held: no final, at once
    connected, *refused = turns
    assert connected["type"] == "connected"
    assert [answer["type"] for answer in refused] == ["error", "error"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("encoding=mp3", "encoding"),
        ("sample_rate=100", "sample_rate"),
        ("language=xx", "language"),
        ("max_silence_duration_secs=inf", "max_silence_duration_secs"),
    ],
)
def test_a_bad_query_is_an_error_then_a_close_with_1008(server, query, param):
    messages, code = asyncio.run(exchange(socket_url(server, "/stt/websocket", query), HEADERS, []))
    assert code == 1008
    assert [message["type"] for message in messages] == ["error"] and param in messages[0]["message"]


def test_a_missing_key_is_closed_with_1008(server):
    async def scenario():
        async with connect(socket_url(server, "/stt/websocket")) as ws:
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            return ws.close_code

    assert asyncio.run(scenario()) == 1008


def test_pipecats_service_pushes_interims_and_the_final_finalize_asks_for(server, conversation):  # noqa: F811
    wave, spans = conversation
    first = pcm(wave[: int((spans[0][1] - 0.3) * RATE)])  # cut before its silence: only `finalize` ends it

    service = CartesiaSTTService(api_key=KEY, base_url=server.base.replace("http", "ws"), sample_rate=RATE)
    frames = asyncio.run(asyncio.wait_for(heard(service, first, RATE), TIMEOUT))
    assert any(isinstance(frame, InterimTranscriptionFrame) for frame in frames)
    final = frames[-1]
    assert isinstance(final, TranscriptionFrame) and final.text and final.result["is_final"]
