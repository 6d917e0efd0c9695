"""Cartesia's speech protocol on a live server hosting a tiny speech model and a ForcedAligner, its key required: the
plugins themselves, unchanged, with their base URL set to the server, then raw messages and requests as they send
them. The plugins, read for what they send and read: livekit-plugins-cartesia 1.8.9
(`livekit/plugins/cartesia/tts.py`: `synthesize()` posts /tts/bytes, within 30 s; `stream()` speaks a sentence a
message over its pooled socket, ends a context with a transcript of " " and reads `word_timestamps`) and pipecat-ai
1.14.0 (`pipecat/services/cartesia/tts.py`: `CartesiaTTSService`, its whole text in one message and "" to end,
word `TTSTextFrame`s from `timestamps`; `CartesiaHttpTTSService` over /tts/bytes). Audio is checked decoded (its
rate, its length, not silence); the aligner has random weights, so what is checked of the words is what holds for
any aligner: every word once, in order, inside the audio, times that never go back."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
from collections.abc import Iterator

import aiohttp
import httpx
import numpy as np
import pytest
import soundfile as sf
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import cartesia as livekit_cartesia
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame, TTSTextFrame
from pipecat.services.cartesia.tts import CartesiaHttpTTSService, CartesiaTTSService
from websockets.asyncio.client import ClientConnection, connect

from pipecat_pipeline import Collected, running
from qwen3_tts_server.service.speech.cartesia import CARTESIA_TTS_SOCKET, MAX_CONTEXTS
from qwen3_tts_server.testing.live_server import LiveProcess, live_process

KEY = "cartesia-test-key"
ENV = {
    "MAX_REQUEST_FRAMES": "20",
    "TEXT_NORMALIZE": "false",
    "IDLE_TIMEOUT": "0",
    "API_KEY": KEY,
    "MAX_PENDING_TEXT": "2000",
}
HEADERS = {"X-API-Key": KEY, "Cartesia-Version": "2026-03-01"}
TEXT = "Hello there, my friend. Goodbye now!"
KATIE = "f786b574-daa5-4673-aa0c-cbe3e8534c02"  # a Cartesia voice (LiveKit's default): our default voice speaks it
TIMEOUT = 300  # a guard against a hang, not a speed limit
# Pipecat ends an audio context that stays silent for `stop_frame_timeout_s` (3 s): parallel test workers can hold a
# tiny model's first audio past that on two cores.
QUIET = {"stop_frame_timeout_s": 60.0}


@pytest.fixture(scope="module")
def server(both_families) -> Iterator[LiveProcess]:
    with live_process(
        "serve", both_families["speech"], "--model", str(both_families["aligner"]), "--preload-model", env=ENV
    ) as live:
        yield live


def assert_speech(pcm: bytes, rate: int) -> float:
    """16-bit speech at `rate`: long enough for a few words, not silence; its seconds."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    seconds = len(samples) / rate
    assert 0.2 < seconds < 30
    assert np.sqrt(np.mean(samples**2)) > 1e-3
    return seconds


def assert_timed(words: list[tuple[str, float, float]], text: str, seconds: float) -> None:
    """Every word of `text` as written, once and in order, inside `seconds` of audio, never going back."""
    assert [word for word, _, _ in words] == text.split()
    assert all(0.0 <= start <= end <= seconds + 0.01 for _, start, end in words), (words, seconds)
    starts = [start for _, start, _ in words]
    assert starts == sorted(starts)


def socket_url(server: LiveProcess, query: str = "cartesia_version=2025-04-16") -> str:
    return server.base.replace("http://", "ws://") + "/tts/websocket?" + query


def generation(context: str, transcript: str, **fields) -> str:
    request = {
        "model_id": "sonic-3",
        "voice": {"mode": "id", "id": "ryan"},
        "language": "en",
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        "add_timestamps": True,
    }
    return json.dumps(request | {"context_id": context, "transcript": transcript} | fields)


async def until_done(ws: ClientConnection, contexts: set[str], messages: list[dict]) -> list[dict]:
    """Messages (added to `messages`) until each of `contexts` has its `done`."""
    waiting = set(contexts)
    while waiting:
        message = json.loads(await ws.recv())
        messages.append(message)
        if message["type"] == "done":
            waiting.discard(message["context_id"])
    return messages


def of(messages: list[dict], context: str, kind: str | None = None) -> list[dict]:
    return [m for m in messages if m["context_id"] == context and kind in (None, m["type"])]


def pcm_of(messages: list[dict]) -> bytes:
    return b"".join(base64.b64decode(m["data"]) for m in messages if m["type"] == "chunk")


def stamps_of(messages: list[dict]) -> list[tuple[str, float, float]]:
    timed = [m["word_timestamps"] for m in messages if m["type"] == "timestamps"]
    return [word for stamps in timed for word in zip(stamps["words"], stamps["start"], stamps["end"], strict=True)]


def test_livekits_cartesia_synthesize_posts_bytes_and_gets_pcm(server):
    async def scenario():
        async with livekit_http.open():
            spoken = []
            for voice in ("ryan", KATIE):
                tts = livekit_cartesia.TTS(api_key=KEY, base_url=server.base, voice=voice)
                spoken.append([audio.frame async for audio in tts.synthesize(TEXT)])
                await tts.aclose()
            return spoken

    for frames in asyncio.run(asyncio.wait_for(scenario(), TIMEOUT)):
        assert {(frame.sample_rate, frame.num_channels) for frame in frames} == {(24000, 1)}
        assert_speech(b"".join(bytes(frame.data) for frame in frames), 24000)


def test_livekits_cartesia_streams_get_aligned_transcripts_one_after_another_over_one_socket(server):
    """Two streams, as an agent speaks two replies, each a context of LiveKit's pooled socket (the second reusing the
    first's) spoken a sentence a message: audio at the rate asked for, and a timed transcript of every word as
    written, inside its audio."""
    texts = (TEXT, "One more, please.")

    async def speak(tts, text: str) -> tuple[bytes, list, bool]:
        stream = tts.stream()
        stream.push_text(text)
        stream.end_input()
        pcm, words = b"", []
        async for event in stream:
            assert (event.frame.sample_rate, event.frame.num_channels) == (16000, 1)
            pcm += bytes(event.frame.data)
            words += event.frame.userdata.get("lk.timed_transcripts", [])
        await stream.aclose()
        return pcm, words, stream._connection_reused

    async def scenario():
        async with livekit_http.open():
            tts = livekit_cartesia.TTS(api_key=KEY, base_url=server.base, voice="ryan", sample_rate=16000)
            spoken = [await speak(tts, text) for text in texts]
            await tts.aclose()
            return spoken

    spoken = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert [reused for _, _, reused in spoken] == [False, True]
    for text, (pcm, words, _) in zip(texts, spoken, strict=True):
        seconds = assert_speech(pcm, 16000)
        assert "".join(str(word) for word in words).split() == text.split()
        assert_timed([(str(w).strip(), w.start_time, w.end_time) for w in words], text, seconds)


def test_pipecats_cartesia_services_speak_over_the_socket_and_http(server):
    """The socket's service gets the audio and a `TTSTextFrame` a word from the timestamps; the HTTP one the audio."""
    socket = CartesiaTTSService(
        api_key=KEY,
        url=server.base.replace("http://", "ws://") + "/tts/websocket",
        settings=CartesiaTTSService.Settings(voice="ryan"),
        **QUIET,
    )

    async def spoken(service) -> list:
        collected = Collected((TTSAudioRawFrame, TTSTextFrame, TTSStoppedFrame, ErrorFrame), until=TTSStoppedFrame)
        async with running(service, collected, audio_out_sample_rate=24000) as worker:
            await worker.queue_frame(TTSSpeakFrame(TEXT))
        return collected.frames

    async def scenario():
        async with aiohttp.ClientSession() as session:
            http = CartesiaHttpTTSService(
                api_key=KEY,
                base_url=server.base,
                aiohttp_session=session,
                settings=CartesiaHttpTTSService.Settings(voice=KATIE),
                **QUIET,
            )
            return await spoken(socket), await spoken(http)

    over_socket, over_http = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    for frames in (over_socket, over_http):
        assert not [frame for frame in frames if isinstance(frame, ErrorFrame)], frames
        audio = [frame for frame in frames if isinstance(frame, TTSAudioRawFrame)]
        assert {(frame.sample_rate, frame.num_channels) for frame in audio} == {(24000, 1)}
        assert_speech(b"".join(frame.audio for frame in audio), 24000)
    assert [frame.text for frame in over_socket if isinstance(frame, TTSTextFrame)] == TEXT.split()


def test_two_contexts_share_a_socket_one_cancelled_while_the_other_completes(server):
    """Raw messages as the plugins send them: context `a` a sentence a message (LiveKit's way) with a flush between,
    `b` its whole text then a cancel; `a` is spoken whole: audio, its words timed from its first audio (across the
    flush), `flush_done`, then `done`; nothing comes for `b` once its cancel is taken (the error a cancel of an
    unknown context gets, sent just after it, marks that), and a second cancel of it is quiet."""

    async def scenario():
        messages: list[dict] = []
        async with connect(socket_url(server), additional_headers={"X-API-Key": KEY}) as ws:
            await ws.send(generation("b", "A long sentence that will not be heard whole, " * 3, **{"continue": True}))
            await ws.send(generation("a", "Hello there, my friend. ", **{"continue": True, "flush": True}))
            while not of(messages, "b", "chunk"):
                messages.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"context_id": "b", "cancel": True}))
            await ws.send(json.dumps({"context_id": "marker", "cancel": True}))
            await ws.send(generation("a", "Goodbye now!", **{"continue": True}))
            await ws.send(generation("a", " ", **{"continue": False}))
            await until_done(ws, {"a"}, messages)
            await ws.send(json.dumps({"context_id": "b", "cancel": True}))  # crossed its end: quiet
            await ws.send(generation("c", "", **{"continue": False}))  # nothing said: done alone
            await until_done(ws, {"c"}, messages)
            return messages

    messages = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert {m["type"] for m in messages} <= CARTESIA_TTS_SOCKET.sent_by("server")
    errors = [m for m in messages if m["type"] == "error"]
    assert [m["context_id"] for m in errors] == ["marker"]
    assert not of(messages[messages.index(errors[0]) :], "b")
    a = of(messages, "a")
    assert [m["type"] for m in a if m["type"] != "chunk"][-1] == "done"
    assert a[-1] == {"type": "done", "context_id": "a", "status_code": 200, "done": True}
    flushed = of(messages, "a", "flush_done")
    assert flushed == [
        {"type": "flush_done", "context_id": "a", "flush_done": True, "flush_id": 1, "status_code": 206, "done": False}
    ]
    chunks = of(messages, "a", "chunk")
    assert all(m["status_code"] == 206 and m["done"] is False and m["step_time"] >= 0 for m in chunks)
    assert {m["flush_id"] for m in chunks} == {1, 2} and a.index(flushed[0]) < a.index(of(a, "a", "chunk")[-1])
    assert_timed(stamps_of(a), TEXT, assert_speech(pcm_of(a), 24000))
    assert of(messages, "c") == [{"type": "done", "context_id": "c", "status_code": 200, "done": True}]


def test_the_socket_speaks_each_encoding_and_refuses_bad_messages_clearly(server):
    """Float and telephony encodings at their rates; then each bad message is an error naming its context (or
    null), and the context it names goes on to its `done`."""
    bad = [
        ("x", b"\x00\x01"),
        ("x", "{not json"),
        ("x", json.dumps({"context_id": 5, "transcript": "Hi."})),
        ("x", json.dumps({"context_id": "nobody", "cancel": True})),
        ("bad", generation("bad", 5)),
        ("bad", generation("bad", "Hi.", voice={"mode": "embedding", "embedding": [0.1]})),
        ("bad", generation("bad", "Hi.", voice={"mode": "id", "id": "nobody"})),
        ("bad", generation("bad", "Hi.", language="pl")),
        ("bad", generation("bad", "Hi.", output_format={"container": "wav", "encoding": "pcm_s16le"})),
        ("bad", generation("bad", "Hi.", output_format={"container": "raw", "encoding": "opus", "sample_rate": 8000})),
        ("ok", generation("ok", "x" * 5000)),
    ]

    async def scenario():
        messages: list[dict] = []
        async with connect(socket_url(server, f"api_key={KEY}")) as ws:
            for context, encoding, rate in (("f32", "pcm_f32le", 22050), ("ulaw", "pcm_mulaw", 8000)):
                fmt = {"container": "raw", "encoding": encoding, "sample_rate": rate}
                await ws.send(generation(context, TEXT, output_format=fmt, add_timestamps=False))
            await until_done(ws, {"f32", "ulaw"}, messages)
            await ws.send(generation("ok", "Short one.", **{"continue": True}))
            for _, message in bad:
                await ws.send(message)
            await ws.send(generation("ok", "", **{"continue": False}))
            await until_done(ws, {"ok"}, messages)
            await ws.send(generation("ok", "More text for an ended context."))
            messages.append(json.loads(await ws.recv()))
        return messages

    messages = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    floats = np.frombuffer(pcm_of(of(messages, "f32")), "<f4")
    assert 0.2 < len(floats) / 22050 < 30 and np.sqrt(np.mean(floats**2)) > 1e-3 and np.abs(floats).max() <= 1.0
    ulaw = np.frombuffer(pcm_of(of(messages, "ulaw")), np.uint8)  # one mu-law byte a sample
    assert 0.2 < len(ulaw) / 8000 < 30 and len(set(ulaw.tolist())) > 16
    assert not of(messages, "f32", "timestamps")  # not asked for
    errors = [m for m in messages if m["type"] == "error"]
    assert [m["context_id"] for m in errors] == [None, None, None, "nobody", *[c for c, _ in bad[4:]], "ok"]
    assert all(m["done"] is True and m["error"] and 400 <= m["status_code"] < 500 for m in errors), errors
    said = [m["error"] for m in errors]
    for error, named in zip(said, ("binary", "JSON", "context_id", "nobody", "transcript", "embedding"), strict=False):
        assert named in error, (named, error)
    assert "nobody" in said[6] and "pl" in said[7] and "wav" in said[8] and "opus" in said[9]
    assert "too long" in said[10] and "has ended" in said[11]
    ok = of(messages, "ok")
    assert ok[-2]["type"] == "done"  # spoken whole, every refusal notwithstanding
    assert_timed(stamps_of(ok), "Short one.", assert_speech(pcm_of(ok), 24000))


def test_a_context_past_the_limit_drops_the_least_recently_used_idle_one(server):
    """LiveKit leaves a context it stops unfinished: past MAX_CONTEXTS open, the one used longest ago with nothing
    left to play is dropped (more text for it is refused; a cancel of it is quiet); the others go on. A wrong key
    closes the socket with 1008."""

    async def scenario():
        messages: list[dict] = []
        async with connect(socket_url(server), additional_headers=HEADERS) as ws:
            for context in range(MAX_CONTEXTS + 1):
                await ws.send(generation(str(context), "", **{"continue": True}))
            await ws.send(json.dumps({"context_id": "0", "cancel": True}))
            await ws.send(generation("0", "Hello again."))
            messages.append(json.loads(await ws.recv()))
            await ws.send(generation("1", "Hello there."))
            await until_done(ws, {"1"}, messages)
        async with connect(socket_url(server), additional_headers={"X-API-Key": "wrong"}) as ws:
            await ws.wait_closed()
            return messages, ws.close_code

    messages, wrong_key = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert messages[0]["type"] == "error" and messages[0]["context_id"] == "0" and "has ended" in messages[0]["error"]
    assert messages[-1]["type"] == "done" and not [m for m in messages[1:] if m["type"] == "error"]
    assert_speech(pcm_of(messages), 24000)
    assert wrong_key == 1008


def test_http_generations_and_the_key(server):
    body = json.loads(generation("http", TEXT))
    with httpx.Client(base_url=server.base, timeout=TIMEOUT, headers=HEADERS) as http:

        def post(path: str, **fields) -> httpx.Response:
            return http.post(path, json=body | fields)

        wav = post("/tts/bytes", output_format={"container": "wav", "encoding": "pcm_s16le", "sample_rate": 16000})
        floats = post("/tts/bytes", output_format={"container": "raw", "encoding": "pcm_f32le", "sample_rate": 24000})
        mp3 = post("/tts/bytes", output_format={"container": "mp3", "sample_rate": 24000, "bit_rate": 128000})
        refused = [
            post("/tts/bytes", output_format={"container": "ogg", "encoding": "pcm_s16le"}),
            post("/tts/bytes", output_format={"container": "wav", "encoding": "pcm_mulaw"}),
            post("/tts/bytes", transcript=""),
            post("/tts/sse", output_format={"container": "mp3"}),
        ]
        sse = post("/tts/sse")
        bearer = httpx.post(f"{server.base}/tts/bytes", json=body, headers={"Authorization": f"Bearer {KEY}"})
        unkeyed = httpx.post(f"{server.base}/tts/bytes", json=body, headers={"X-API-Key": "wrong"})
    samples, rate = sf.read(io.BytesIO(wav.content), dtype="int16")
    assert wav.status_code == 200 and rate == 16000
    assert_speech(samples.tobytes(), 16000)
    audio = np.frombuffer(floats.content, "<f4")
    assert 0.2 < len(audio) / 24000 < 30 and np.abs(audio).max() <= 1.0
    assert mp3.headers["content-type"] == "audio/mpeg" and len(mp3.content) > 1000
    assert [answer.status_code for answer in refused] == [400, 400, 400, 400]
    assert all(answer.json()["error"]["message"] for answer in refused)
    assert bearer.status_code == 200 and unkeyed.status_code == 401
    assert sse.headers["content-type"].startswith("text/event-stream")
    events = [block.split("\n") for block in sse.text.strip().split("\n\n")]
    messages = [json.loads(data.removeprefix("data: ")) for name, data in events]
    assert [name.removeprefix("event: ") for name, _ in events] == [m["type"] for m in messages]
    assert messages[-1] == {"type": "done", "context_id": "http", "status_code": 200, "done": True}
    assert_timed(stamps_of(messages), TEXT, assert_speech(pcm_of(messages), 24000))


def test_a_client_that_leaves_mid_speech_stops_its_contexts_and_leaves_no_error_in_the_log(server):
    start = len(server.log_path.read_bytes())

    async def leave(abruptly: bool) -> None:
        async with connect(socket_url(server), additional_headers=HEADERS) as ws:
            await ws.send(generation("a", TEXT * 3, **{"continue": True}))
            await ws.send(generation("b", TEXT))
            while json.loads(await ws.recv())["type"] != "chunk":
                pass
            if abruptly:
                ws.transport.abort()

    for abruptly in (True, False):
        asyncio.run(asyncio.wait_for(leave(abruptly), TIMEOUT))
    deadline = time.monotonic() + TIMEOUT
    while server.health()["active_streams"]:  # every context's engine jobs stopped
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(0.5)  # anything logged as a socket's tasks wind down
    log = server.log_path.read_bytes()[start:].decode(errors="replace").splitlines()
    assert [line for line in log if "unexpected" in line or "Traceback" in line or '"ERROR"' in line] == []
