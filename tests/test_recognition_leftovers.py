"""What a hostile-input probe left of issue 46, as clients meet it: a realtime item whose transcription fails gets its
own `.failed` (after its `committed`, instead of `.completed`); a commit where server VAD heard no speech commits the
audio, not an item of none, and a commit of nothing since is `input_audio_buffer_commit_empty`; an utterance at its
longest gets its final there, the audio after it going on in the next; Wyoming's names and terms are bounded as a
prompt is; a translation's time limit is REQUEST_TIMEOUT for the whole request; a body far over the limit is a 413 an
async client reads, on every route; a binary frame on /v1/realtime is an error event; live idle time counts only what
is of use."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest
import soundfile as sf
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from live_cases import session_events
from qwen3_tts_server.engine.recognition import RecognitionEngine
from qwen3_tts_server.errors import TranscriptionFailedError
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.streaming import StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.service.recognition.live import Committed, LiveTranscript
from qwen3_tts_server.service.recognition.realtime import RealtimeTranscription
from qwen3_tts_server.service.recognition.transcription import MAX_CONTEXT_CHARACTERS, RecognitionService
from qwen3_tts_server.testing.live_server import LiveProcess, free_port, live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import ENV
from test_wyoming import read_until

TIMEOUT = 60
IDLE = 2.0  # LIVE_IDLE_TIMEOUT
REQUEST_TIMEOUT = 3.0
MIB = 1 << 20
STREAMING = StreamingSettings(max_new_tokens=6)


@pytest.fixture(scope="module")
def hanging_translator() -> Iterator[str]:
    """A chat API that takes connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


@pytest.fixture(scope="module")
def server(both_families, hanging_translator) -> Iterator[tuple[LiveProcess, int]]:
    env = {
        **ENV,
        "LIVE_IDLE_TIMEOUT": str(IDLE),
        "REQUEST_TIMEOUT": str(REQUEST_TIMEOUT),
        "MAX_TRANSCRIPTION_BYTES": str(MIB),
        "TRANSLATE_BASE_URL": hanging_translator,
        "TRANSLATE_MODEL": "translator",
    }
    port = free_port()
    asr = ("--model", str(both_families["asr"]), "--wyoming-port", str(port))
    with live_process("serve", both_families["speech"], *asr, env=env) as live:
        yield live, port


@pytest.fixture(scope="module")
def transcriber(both_families) -> Transcriber:
    return Transcriber(load_asr_checkpoint(both_families["asr"]))


def realtime_url(live: LiveProcess) -> str:
    return live.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"


async def events_within(ws: ClientConnection, seconds: float) -> list[dict]:
    """What the server sends within `seconds` of quiet."""
    events = []
    while True:
        try:
            events.append(json.loads(await asyncio.wait_for(ws.recv(), seconds)))
        except asyncio.TimeoutError:
            return events


def append(samples: bytes) -> str:
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(samples).decode()})


# -- a: a failed transcription is its own item's ---------------------------------------------------------------------


def test_a_failed_item_transcription_names_that_item_after_its_commit(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=1).start()

    async def failing(job):
        raise TranscriptionFailedError("the pass failed")
        yield  # an async generator, as the engine's submit is

    engine.submit = failing
    registry = SimpleNamespace(recognizers=[SimpleNamespace(id="asr", footprint=None)])
    sent: list[dict] = []

    async def send(event: dict) -> None:
        sent.append(event)

    async def scenario():
        session = RealtimeTranscription(registry, {"asr": RecognitionService(engine)}, send, False, 60.0)
        await session.open()
        update = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        await session.handle(json.dumps({"type": "session.update", "session": update}))
        audio = (voiced_glide(3.0, 24000, pitch=140.0) * 32767).astype("<i2").tobytes()
        await session.handle(append(audio))
        await session.handle(json.dumps({"type": "input_audio_buffer.commit"}))
        await session.handle(append(audio))  # the next item begins before the first one's passes fail
        deadline = time.monotonic() + TIMEOUT
        while not any(event["type"].endswith(".failed") for event in sent):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        await session.close()

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()
    kinds = [event["type"] for event in sent]
    (committed,) = [event for event in sent if event["type"] == "input_audio_buffer.committed"]
    (failed,) = [event for event in sent if event["type"] == "conversation.item.input_audio_transcription.failed"]
    assert failed["item_id"] == committed["item_id"] and kinds.index(failed["type"]) > kinds.index(committed["type"])
    assert failed["error"]["type"] == "transcription_error" and failed["error"]["message"] == "the pass failed"
    assert "conversation.item.input_audio_transcription.completed" not in kinds  # failed instead, not besides


# -- b: a commit of silence under server VAD -------------------------------------------------------------------------


def test_a_commit_where_server_vad_heard_no_speech_commits_the_audio_not_an_item_of_none(server):
    live, _ = server

    async def scenario():
        async with connect(realtime_url(live)) as ws:
            await ws.recv()  # session.created: server VAD on
            await ws.send(append(bytes(2 * 24000)))  # 1 s of silence
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            events = [json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))]
            while events[-1]["type"] != "conversation.item.input_audio_transcription.completed":
                events.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))  # nothing since
            return events, json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))

    events, refused = asyncio.run(scenario())
    assert events[0]["type"] == "input_audio_buffer.committed"
    assert events[-1]["usage"]["seconds"] == pytest.approx(1.0, abs=0.01)  # the audio committed, not none
    assert refused["type"] == "error" and refused["error"]["code"] == "input_audio_buffer_commit_empty"


# -- c: an utterance at its longest ----------------------------------------------------------------------------------


def test_an_utterance_at_its_longest_gets_its_final_there_and_the_rest_goes_on(transcriber):
    wave = voiced_glide(6.0, pitch=150.0)
    feeds = [wave[start : start + 8000] for start in range(0, len(wave), 8000)]
    events = session_events(transcriber, feeds, streaming=STREAMING, max_utterance_seconds=2.5)
    assert [event for event in events if isinstance(event, Committed)] == [
        Committed(0, 2.5),
        Committed(1, 2.5),
        Committed(2, 1.0, by_commit=True),  # the last by the client's commit, the others at their longest
    ]  # nothing dropped: 6 s in all
    finals = [event.utterance for event in events if isinstance(event, LiveTranscript) and event.final]
    assert finals == [0, 1, 2]


# -- d: Wyoming's names and terms ------------------------------------------------------------------------------------


def test_wyoming_names_and_terms_are_bounded_as_a_prompt_is(server):
    _, port = server
    names = ["x" * 1000] * (MAX_CONTEXT_CHARACTERS // 1000 + 1)
    chunk = (voiced_glide(0.5, pitch=150.0) * 32767).astype("<i2").tobytes()
    audio = [AudioStart(rate=16000, width=2, channels=1).event(), AudioChunk(16000, 2, 1, chunk).event()]

    async def scenario():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Transcribe(transcript_names=names).event())
            refused = await asyncio.wait_for(read_until(client, "error"), TIMEOUT)
            for event in [Transcribe(transcript_names=["Zoë"]).event(), *audio, AudioStop().event()]:
                await client.write_event(event)
            served = await asyncio.wait_for(read_until(client, "transcript-stop"), TIMEOUT)
            return refused, served

    refused, served = asyncio.run(scenario())
    assert "transcript_names and transcript_terms" in refused[-1].data["text"]
    assert served[-1].type == "transcript-stop"  # the connection goes on


# -- e: a translation's time limit -----------------------------------------------------------------------------------


def test_a_translation_gets_request_timeout_in_all_as_a_transcription_timeout(server):
    live, _ = server
    buffer = io.BytesIO()
    sf.write(buffer, voiced_glide(1.0, 16000, pitch=135.0), 16000, format="WAV")
    with live.client(timeout=TIMEOUT) as client:
        client.post("/v1/audio/transcriptions", files={"file": ("a.wav", buffer.getvalue())})  # the model loaded
        started = time.monotonic()
        answer = client.post("/v1/audio/translations", files={"file": ("a.wav", buffer.getvalue())})
        took = time.monotonic() - started
    assert answer.status_code == 504 and answer.json()["error"]["code"] == "timeout"
    assert answer.json()["code"] == "TRANSCRIPTION_TIMEOUT"
    assert took < REQUEST_TIMEOUT + 1.0  # the transcription's time counted: not REQUEST_TIMEOUT for each


# -- f: huge bodies --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "multipart", "limit"),
    [
        ("/v1/audio/speech", False, MIB),
        ("/v1/audio/voices", True, 10 * MIB),
        ("/v1/audio/speech/clone", True, 10 * MIB),
        ("/v1/audio/transcriptions", True, MIB),
        ("/v1/audio/subtitles", True, MIB),
    ],
)
@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_far_over_the_limit_is_a_413_an_async_client_reads(server, path, multipart, limit, chunked):
    live, _ = server
    size = 6 * limit
    if multipart:
        headers = {"Content-Type": "multipart/form-data; boundary=BB"}
        head = b'--BB\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
        body = head + bytes(size) + b"\r\n--BB--\r\n"
    else:
        headers = {"Content-Type": "application/json"}
        body = b'{"input": "' + b"x" * size + b'"}'

    async def pieces():
        for start in range(0, len(body), 1 << 16):
            yield body[start : start + (1 << 16)]

    async def scenario() -> httpx.Response:
        async with httpx.AsyncClient(base_url=live.base, timeout=TIMEOUT) as client:
            return await client.post(path, content=pieces() if chunked else body, headers=headers)

    answer = asyncio.run(scenario())
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"


# -- g: binary frames on /v1/realtime --------------------------------------------------------------------------------


def test_a_binary_frame_on_realtime_is_an_error_event_and_the_session_goes_on(server):
    live, _ = server

    async def scenario():
        async with connect(realtime_url(live)) as ws:
            await ws.recv()
            await ws.send(b"\x00\x01\x02\x03")
            refused = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
            return refused, json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))

    refused, cleared = asyncio.run(scenario())
    assert refused["type"] == "error" and refused["error"]["type"] == "invalid_request_error"
    assert refused["error"]["param"] == "event" and "binary" in refused["error"]["message"]
    assert cleared["type"] == "input_audio_buffer.cleared"


# -- h: idle time counts what is of use ------------------------------------------------------------------------------


async def closed_within(ws: ClientConnection, seconds: float, keep_sending) -> tuple[list[dict], int | None]:
    """What `ws` receives while `keep_sending()` runs every 0.25 s, until it is closed or `seconds` pass, and its
    close code (None: still open)."""
    frames, deadline = [], time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            await keep_sending()
            with contextlib.suppress(asyncio.TimeoutError):
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), 0.25)))
    except ConnectionClosed as closed:
        with contextlib.suppress(ConnectionClosed):  # what came before the close, not yet read
            while True:
                frames.append(json.loads(await ws.recv()))
        return frames, closed.rcvd.code if closed.rcvd else None
    return frames, None


def test_messages_that_carry_nothing_do_not_keep_a_live_session(server):
    live, _ = server
    transcribe = live.base.replace("http", "ws", 1) + "/ws/transcribe?use_server_vad=false"

    async def scenario():
        async with connect(realtime_url(live)) as ws:
            await ws.recv()

            async def junk() -> None:
                await ws.send(append(b""))
                await ws.send(json.dumps({"type": "nonsense"}))

            realtime = await closed_within(ws, 4 * IDLE, junk)
        async with connect(transcribe) as ws:
            await ws.recv()

            async def nothing() -> None:
                await ws.send(b"")
                await ws.send(json.dumps({"action": "nonsense"}))

            earlier = await closed_within(ws, 4 * IDLE, nothing)
        return realtime, earlier

    (realtime, realtime_code), (earlier, earlier_code) = asyncio.run(scenario())
    assert realtime_code == 1001 and realtime[-1]["error"]["code"] == "idle_timeout"
    assert earlier_code == 1001 and earlier[-1]["code"] == "IDLE_TIMEOUT"


def test_a_client_streaming_audio_steadily_is_not_idle(server):
    live, _ = server

    async def scenario():
        async with connect(realtime_url(live)) as ws:
            await ws.recv()

            async def silence() -> None:
                await ws.send(append(bytes(2400)))  # 50 ms

            return await closed_within(ws, 3 * IDLE, silence)

    frames, code = asyncio.run(scenario())
    assert code is None and not [frame for frame in frames if frame["type"] == "error"]
