"""WS /v1/audio/speech/ws on a real server over loopback, driven by the `websockets` client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from qwen3_tts_server.service.speech.realtime import LOOKAHEAD_CLAUSES, SPEECH_SOCKET
from qwen3_tts_server.testing.live_server import live_server

PCM_FRAME_BYTES = 1920 * 2  # 80 ms of 16-bit samples at 24 kHz
TIMEOUT = 300  # a guard against a hang, not a speed limit: a busy machine took over 60 s for two clauses

Message = dict | bytes


@pytest.fixture(scope="module")
def server(checkpoint_dirs) -> Iterator[str]:
    with live_server(checkpoint_dirs["custom_voice"]) as base:
        yield base


def ws_url(base: str, query: str = "") -> str:
    return base.replace("http://", "ws://", 1) + "/v1/audio/speech/ws" + query


async def send(ws: ClientConnection, **message) -> None:
    await ws.send(json.dumps(message))


async def receive_until(ws: ClientConnection, kind: str, arrivals: list[float] | None = None) -> list[Message]:
    """Messages (events parsed, audio as bytes) up to the first event of `kind` or, with "audio", binary frame."""

    async def receive() -> list[Message]:
        messages = []
        while True:
            raw = await ws.recv()
            if arrivals is not None:
                arrivals.append(time.monotonic())
            message = raw if isinstance(raw, bytes) else json.loads(raw)
            if isinstance(message, dict):  # every event the server sends is one its protocol declares
                assert message["type"] in SPEECH_SOCKET.sent_by("server"), message
            messages.append(message)
            if isinstance(message, bytes) if kind == "audio" else isinstance(message, dict) and message["type"] == kind:
                return messages

    return await asyncio.wait_for(receive(), TIMEOUT)


def segments(messages: list[Message]) -> list[tuple[dict, bytes, dict]]:
    """(segment.start, its audio, segment.end) in order; audio outside a segment fails."""
    out, start, audio = [], None, []
    for message in messages:
        if isinstance(message, bytes):
            assert start is not None, "audio outside a segment"
            audio.append(message)
        elif message["type"] == "segment.start":
            assert start is None
            start, audio = message, []
        elif message["type"] == "segment.end":
            assert start is not None and message["segment"] == start["segment"]
            out.append((start, b"".join(audio), message))
            start = None
    return out


async def engine_jobs(base: str) -> int:
    """Jobs the server's engine is running or holding in its queue, from /health."""
    async with httpx.AsyncClient(base_url=base) as http:
        health = (await http.get("/health")).json()
    return health["active_streams"] + health["queue_depth"]


async def wait_idle(base: str) -> int:
    """engine_jobs once it reaches 0, or after 30 s."""
    for _ in range(300):
        if not (jobs := await engine_jobs(base)):
            break
        await asyncio.sleep(0.1)
    return jobs


def speak(server: str, text: str, **config) -> tuple[dict, list[Message]]:
    """Configure a fresh connection, speak `text` whole: (the session.updated event, messages up to done)."""

    async def scenario():
        async with connect(ws_url(server)) as ws:
            await send(ws, type="session.update", **config)
            updated = await receive_until(ws, "session.updated")
            await send(ws, type="input_text", text=text)
            return updated[-1], await receive_until(ws, "done")

    return asyncio.run(scenario())


def test_whole_text_streams_pcm_segments_in_order(server):
    updated, messages = speak(server, "Good morning to you, and welcome back.", voice="Vivian", seed=1)
    assert updated["session"]["voice"] == "Vivian" and updated["session"]["seed"] == 1
    assert updated["session"]["response_format"] == "pcm" and updated["session"]["sample_rate"] == 24000
    parts = segments(messages)
    assert [(start["utterance"], start["segment"]) for start, _, _ in parts] == [(0, 0), (0, 1)]
    assert [start["text"] for start, _, _ in parts] == ["Good morning to you,", "and welcome back."]
    for _, audio, end in parts:
        assert end["frames"] > 0 and len(audio) == end["frames"] * PCM_FRAME_BYTES
    done = messages[-1]
    assert done["utterance"] == 0 and done["segments"] == 2
    assert done["usage"]["output_tokens"] == sum(end["frames"] for _, _, end in parts)
    assert done["usage"]["total_tokens"] == done["usage"]["input_tokens"] + done["usage"]["output_tokens"] > 0


def test_speech_starts_at_the_first_clause_before_the_commit(server):
    tokens = ["Hi", " there", ",", " my", " friend", ".", " Then", " it", " ran", " off", "."]

    async def scenario():
        arrivals: list[float] = []
        async with connect(ws_url(server)) as ws:
            first = asyncio.create_task(receive_until(ws, "audio", arrivals))
            for token in tokens:
                await send(ws, type="input_text.append", text=token)
                await asyncio.sleep(0.2)
            committed = time.monotonic()
            await send(ws, type="input_text.commit")
            messages = await first
            await send(ws, type="cancel")  # no need to hear it out
            await receive_until(ws, "cancelled")
            return committed, arrivals, messages

    committed, arrivals, messages = asyncio.run(scenario())
    text = "Hi there, my friend."
    start = {"type": "segment.start", "utterance": 0, "segment": 0, "text": text, "spoken_text": text}
    assert messages[0] == {**start, "language": "english"}
    assert isinstance(messages[1], bytes) and arrivals[1] < committed, "the first clause is spoken while text arrives"


def test_a_clause_too_short_to_tell_takes_its_utterances_language_then_the_sessions(server):
    """A phone number's clause ("+1 (555) 010-0199 ext.") has no language of its own: left to the model's Auto it
    could be spoken in another language. It takes its utterance's (the text known when it is spoken), else the
    language the session heard last."""

    async def scenario() -> list[list[tuple[str, str]]]:
        heard = []
        async with connect(ws_url(server)) as ws:
            await send(ws, type="input_text", text="+1 (555) 010-0199 ext. 42, call before 5 pm")
            heard.append(await receive_until(ws, "done"))
            await send(ws, type="input_text", text="Ruf an: +49 30 1234567 App. 42, vor 17 Uhr bitte.")
            heard.append(await receive_until(ws, "done"))
            for piece in ("+1 (555) ", "010-0199 ext. ", "42, call me back before five"):  # streamed: the number first
                await send(ws, type="input_text.append", text=piece)
            await send(ws, type="input_text.commit")
            heard.append(await receive_until(ws, "done"))
        return [[(start["text"], start["language"]) for start, _, _ in segments(messages)] for messages in heard]

    english, german, streamed = asyncio.run(scenario())
    assert english == [("+1 (555) 010-0199 ext.", "english"), ("42, call before 5 pm", "english")]
    assert {language for _, language in german} == {"german"}, german
    assert streamed[0] == ("+1 (555) 010-0199 ext.", "german"), "none of its utterance known yet: the session's last"
    assert streamed[-1][1] == "english"


def test_mulaw_at_8khz_is_one_byte_a_sample(server):
    text = "The call costs $5 a minute."
    updated, messages = speak(server, text, response_format="mulaw", sample_rate=8000, language="English")
    assert updated["session"]["response_format"] == "mulaw" and updated["session"]["sample_rate"] == 8000
    [(start, audio, end)] = segments(messages)
    assert start["text"] == text and start["spoken_text"] == "The call costs five dollars a minute."
    assert end["frames"] > 0 and len(audio) == end["frames"] * 640  # 80 ms at 8 kHz, one byte a sample


def test_cancel_stops_audio_frees_the_engine_and_the_next_utterance_plays(server):
    async def scenario():
        async with connect(ws_url(server)) as ws:
            # Seeded: the first clause cannot end by chance before the engine's jobs are counted.
            await send(ws, type="session.update", seed=0)
            await send(ws, type="input_text", text="A first sentence that runs long. And a second one too.")
            await receive_until(ws, "audio")
            busy = await engine_jobs(server)
            await send(ws, type="cancel")
            cancelled = await receive_until(ws, "cancelled")
            await asyncio.sleep(0.3)  # time for stray audio to show up before the next utterance
            idle = await wait_idle(server)
            await send(ws, type="input_text", text="A short reply.")
            return busy, cancelled, idle, await receive_until(ws, "done")

    busy, cancelled, idle, after = asyncio.run(scenario())
    assert busy == 2 and idle == 0
    assert cancelled[-1] == {"type": "cancelled", "utterance": 0}
    assert not any(isinstance(m, dict) and m["type"] == "done" for m in cancelled)
    assert isinstance(after[0], dict) and after[0]["type"] == "segment.start", "audio was sent after the cancel"
    assert all(m["utterance"] == 1 for m in after if isinstance(m, dict))
    [(_, audio, end)] = segments(after)
    assert len(audio) == end["frames"] * PCM_FRAME_BYTES > 0


def test_a_client_that_leaves_mid_utterance_frees_its_engine_rows(server):
    async def scenario():
        async with connect(ws_url(server)) as ws:
            await send(ws, type="input_text", text="Talking to nobody at all. Still talking on and on.")
            await receive_until(ws, "audio")
            busy = await engine_jobs(server)
        return busy, await wait_idle(server)

    assert asyncio.run(scenario()) == (2, 0)


def test_a_long_text_holds_a_few_engine_jobs_and_every_clause_plays(server):
    """A clause's job starts once it is within LOOKAHEAD_CLAUSES of the one playing: a text of many clauses never
    fills the engine's rows ahead of other requests (all six used to be queued at once), yet all are spoken."""
    clauses = [f"Clause number {n} is here." for n in range(6)]

    async def scenario():
        async with connect(ws_url(server)) as ws:
            await send(ws, type="session.update", seed=0)
            await send(ws, type="input_text", text=" ".join(clauses))
            messages = await receive_until(ws, "audio")
            jobs = []
            for _ in range(10):
                jobs.append(await engine_jobs(server))
                await asyncio.sleep(0.05)
            return jobs, messages + await receive_until(ws, "done")

    jobs, messages = asyncio.run(scenario())
    assert 0 < max(jobs) <= 1 + LOOKAHEAD_CLAUSES, jobs
    parts = segments(messages)
    assert [(start["segment"], start["text"]) for start, _, _ in parts] == list(enumerate(clauses))
    assert all(len(audio) == end["frames"] * PCM_FRAME_BYTES > 0 for _, audio, end in parts)
    assert messages[-1]["segments"] == len(clauses)


def test_bad_messages_get_error_events_and_the_connection_survives(server):
    bad = [
        ("{not json", None, "invalid_request"),
        (b"\x00\x01", None, "invalid_request"),
        (json.dumps({"type": "dance"}), "type", "invalid_request"),
        (json.dumps({"type": "session.update", "voice": "nobody"}), "voice", "invalid_request"),
        (json.dumps({"type": "session.update", "speed": 9}), "speed", "invalid_value"),
        (json.dumps({"type": "session.update", "response_format": "mp3"}), "response_format", "invalid_request"),
        (json.dumps({"type": "session.update", "sample_rate": 4000}), "sample_rate", "invalid_value"),  # schema range
        (json.dumps({"type": "session.update", "volume": 2}), "volume", "invalid_request"),
        (json.dumps({"type": "session.update", "timestamps": True}), "timestamps", "invalid_request"),  # no aligner
        (json.dumps({"type": "input_text.append", "text": "x" * 5000}), "text", "invalid_request"),
        (json.dumps({"type": "input_text.commit"}), "text", "invalid_request"),
    ]

    async def scenario():
        async with connect(ws_url(server)) as ws:
            replies = []
            for message, _, _ in bad:
                await ws.send(message)
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            await send(ws, type="session.update", voice="ryan")
            return replies, json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))

    replies, updated = asyncio.run(scenario())
    for (message, param, code), reply in zip(bad, replies, strict=True):
        assert reply["type"] == "error", message
        error = reply["error"]
        assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error"), message
        assert error["message"]
    assert updated["type"] == "session.updated"  # the refused updates changed nothing
    assert updated["session"]["voice"] == "ryan" and updated["session"]["speed"] == 1.0
    assert updated["session"]["response_format"] == "pcm"


def test_api_key_from_the_header_or_the_query(checkpoint_dirs):
    async def refused(url: str, headers: dict | None = None) -> int:
        async with connect(url, additional_headers=headers) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), TIMEOUT)
        return closed.value.rcvd.code

    async def accepted(url: str, headers: dict | None = None) -> str:
        async with connect(url, additional_headers=headers) as ws:
            await send(ws, type="session.update")
            return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))["type"]

    async def scenario(base: str):
        url = ws_url(base)
        codes = [
            await refused(url),
            await refused(url, {"Authorization": "Bearer wrong"}),
            await refused(ws_url(base, "?api_key=wrong")),
            await refused(url, {"xi-api-key": "wrong"}),
            await refused(url, {"X-API-Key": "wrong"}),
        ]
        kinds = [
            await accepted(url, {"Authorization": "Bearer secret"}),
            await accepted(ws_url(base, "?api_key=secret")),
            await accepted(url, {"xi-api-key": "secret"}),  # ElevenLabs' clients' header
            await accepted(url, {"X-API-Key": "secret"}),  # Cartesia's clients' header
        ]
        return codes, kinds

    with live_server(checkpoint_dirs["custom_voice"], "--api-key", "secret") as base:
        codes, kinds = asyncio.run(scenario(base))
    assert codes == [1008] * 5
    assert kinds == ["session.updated"] * 4


def test_the_earlier_servers_messages_are_answered_in_its_form(server):
    """The earlier server's client: `{"input", "voice", ...}` without a `type`, answered with binary PCM and
    `{"event": "done"}`, errors as `{"event": "error", "detail": ...}`; the typed protocol goes on beside it."""

    async def receive_legacy(ws: ClientConnection) -> tuple[bytes, dict]:
        audio = []
        while isinstance(message := await asyncio.wait_for(ws.recv(), TIMEOUT), bytes):
            audio.append(message)
        return b"".join(audio), json.loads(message)

    async def scenario():
        async with connect(ws_url(server)) as ws:
            legacy = {"voice": "vivian", "language": "English", "temperature": 0.9, "top_p": 0.8, "seed": 4}
            await send(ws, input="Hello there. How are you today?", **legacy)
            spoken = await receive_legacy(ws)
            await send(ws, input="Hi.", voice="nobody")
            refused = await receive_legacy(ws)
            await send(ws, input="Hi.", temperature=-1)
            invalid = await receive_legacy(ws)
            await send(ws, type="input_text", text="Still typed.")
            typed = await receive_until(ws, "done")
            return spoken, refused, invalid, typed

    (audio, done), refused, invalid, typed = asyncio.run(scenario())
    assert done == {"event": "done"} and len(audio) >= 2 * PCM_FRAME_BYTES and len(audio) % PCM_FRAME_BYTES == 0
    for leftover, error in (refused, invalid):
        assert leftover == b"" and error["event"] == "error" and set(error) == {"event", "detail"}
    assert "unknown voice 'nobody'" in refused[1]["detail"] and "temperature" in invalid[1]["detail"]
    assert typed[-1]["type"] == "done" and len(segments(typed)) == 1


def test_without_a_forced_aligner_timestamps_are_refused_and_elevenlabs_audio_still_plays(server):
    """No ForcedAligner hosted: a request that asks for timestamps gets a 400 naming the setting; ElevenLabs'
    clients, which cannot ask, get their audio with no alignment and their `isFinal`."""
    body = {"input": "Hello there.", "voice": "ryan", "stream_format": "sse", "timestamps": True}
    with httpx.Client(base_url=server, timeout=TIMEOUT) as http:
        sse = http.post("/v1/audio/speech", json=body)
        captioned = http.post("/dev/captioned_speech", json={"input": "Hello there.", "voice": "ryan"})
    for answer in (sse, captioned):
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "timestamps"
        assert "ForcedAligner" in answer.json()["error"]["message"] and "MODELS" in answer.json()["error"]["message"]

    async def scenario():
        url = server.replace("http://", "ws://") + "/v1/text-to-speech/ryan/multi-stream-input?output_format=pcm_24000"
        async with connect(url) as ws:
            await ws.send(json.dumps({"text": " ", "context_id": "c"}))
            await ws.send(json.dumps({"text": "Hello there.", "context_id": "c", "flush": True}))
            await ws.send(json.dumps({"context_id": "c", "close_context": True}))
            messages = []
            while not (messages and messages[-1].get("isFinal")):
                messages.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            return messages

    messages = asyncio.run(scenario())
    assert messages[-1] == {"isFinal": True, "contextId": "c"}
    audio = messages[:-1]
    assert audio and all(m["audio"] and m["alignment"] is None and m["contextId"] == "c" for m in audio)
