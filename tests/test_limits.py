"""Limits with clear errors, on one live server with small limits: open WebSockets (1013), body size (413),
deep JSON (400), headers (431), a slow body (408), and WebSocket text arriving faster than it is spoken."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from qwen3_tts_server.api.limits import MAX_BODY_BYTES, MAX_HEADERS, RequestLimits
from qwen3_tts_server.gateway.asgi import Outcome
from qwen3_tts_server.gateway.proxy import proxy_http
from qwen3_tts_server.testing.live_server import LiveProcess, live_process

MAX_WEBSOCKETS = 2
MAX_PENDING_TEXT = 300
BODY_TIMEOUT = 2.0
MAX_FRAMES = 40  # the random-weight model's segments end at this cap: quick to generate
TIMEOUT = 60
SPEECH = "/v1/audio/speech"


@pytest.fixture(scope="module")
def server(checkpoint_dirs) -> Iterator[LiveProcess]:
    env = {
        "MAX_WEBSOCKETS": str(MAX_WEBSOCKETS),
        "MAX_PENDING_TEXT": str(MAX_PENDING_TEXT),
        "BODY_TIMEOUT": str(BODY_TIMEOUT),
        "MAX_REQUEST_FRAMES": str(MAX_FRAMES),
        "LOG_FORMAT": "text",
    }
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=env) as live:
        yield live


def ws_url(live: LiveProcess) -> str:
    return live.base.replace("http://", "ws://", 1) + "/v1/audio/speech/ws"


def raw_exchange(live: LiveProcess, head: bytes, body_pieces: list[bytes] = (), pause: float = 0.0) -> bytes:
    """Send `head`, then each body piece `pause` s apart while the server has not answered; everything the
    server sent before it closed the connection (the test fails if it keeps it open for 30 s)."""
    address = urlsplit(live.base)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(head)
        for piece in body_pieces:
            time.sleep(pause)
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def parse_response(raw: bytes) -> tuple[int, dict[str, str], dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body)


def assert_envelope(payload: dict, code: str) -> None:
    error = payload["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["type"] == "invalid_request_error" and error["message"]


# -- WebSockets ---------------------------------------------------------------------------------------------


async def session_ready(ws: ClientConnection) -> dict:
    await ws.send(json.dumps({"type": "session.update", "voice": "alloy"}))
    return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))


def test_websockets_past_the_limit_are_closed_with_1013_until_one_closes(server):
    async def scenario() -> None:
        first, second = [await connect(ws_url(server)) for _ in range(MAX_WEBSOCKETS)]
        for ws in (first, second):
            assert (await session_ready(ws))["type"] == "session.updated"
        async with connect(ws_url(server)) as refused:
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(refused.recv(), TIMEOUT)
        assert refused.close_code == 1013 and "try again later" in refused.close_reason

        await first.close()
        for _ in range(50):  # the slot frees once the server has wound the session down
            async with connect(ws_url(server)) as again:
                try:
                    answer = await session_ready(again)
                    break
                except ConnectionClosed:
                    assert again.close_code == 1013
                    await asyncio.sleep(0.1)
        assert answer["type"] == "session.updated"
        assert (await session_ready(second))["type"] == "session.updated", "the open one was untouched"
        await second.close()

    asyncio.run(scenario())


async def events_until(ws: ClientConnection, kind: str) -> list[dict | bytes]:
    messages: list[dict | bytes] = []

    async def receive() -> None:
        while True:
            raw = await ws.recv()
            messages.append(raw if isinstance(raw, bytes) else json.loads(raw))
            if isinstance(messages[-1], dict) and messages[-1]["type"] == kind:
                return

    await asyncio.wait_for(receive(), TIMEOUT)
    return messages


def test_text_faster_than_speech_is_refused_until_speech_catches_up(server):
    held = "word " * 50  # 250 characters with no break: the segmenter holds them all

    async def scenario() -> None:
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps({"type": "input_text.append", "text": held}))
            await ws.send(json.dumps({"type": "input_text.append", "text": "one more sentence of text. " * 2}))
            refusal = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            assert refusal["type"] == "error"
            assert_envelope(refusal, "pending_text_limit")
            assert refusal["error"]["param"] == "text"

            await ws.send(json.dumps({"type": "input_text.commit"}))
            spoken = [m for m in await events_until(ws, "done") if isinstance(m, dict)]
            texts = [m["text"] for m in spoken if m["type"] == "segment.start"]
            assert " ".join(texts) == held.strip(), "the refused text was not taken"
            assert any(isinstance(m, dict) and m["type"] == "segment.end" for m in spoken)

            # Everything was spoken: the same amount of text is taken again.
            await ws.send(json.dumps({"type": "input_text", "text": held}))
            again = await events_until(ws, "done")
            assert not any(isinstance(m, dict) and m["type"] == "error" for m in again)
            assert any(isinstance(m, bytes) for m in again)

    asyncio.run(scenario())


def test_segments_not_yet_played_count_as_pending(server):
    sentence = "A sentence of text that the session is going to say before anything else."
    more = "And then this much longer sentence, " * 5  # refused while two of the three segments wait
    assert 3 * len(sentence) <= MAX_PENDING_TEXT < 2 * len(sentence) + len(more) < 2 * MAX_PENDING_TEXT

    async def scenario() -> None:
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps({"type": "input_text", "text": " ".join([sentence] * 3)}))
            await ws.send(json.dumps({"type": "input_text", "text": more}))
            messages = await events_until(ws, "done")
            errors = [m for m in messages if isinstance(m, dict) and m["type"] == "error"]
            assert len(errors) == 1 and errors[0]["error"]["code"] == "pending_text_limit"
            ends = [m for m in messages if isinstance(m, dict) and m["type"] == "segment.end"]
            assert len(ends) == 3

    asyncio.run(scenario())


def test_websocket_message_nested_too_deep_gets_an_error_event(server):
    async def scenario() -> dict:
        async with connect(ws_url(server)) as ws:
            await ws.send("[" * 100_000)
            error = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            assert (await session_ready(ws))["type"] == "session.updated", "the session goes on"
            return error

    error = asyncio.run(scenario())
    assert error["type"] == "error" and error["error"]["code"] == "invalid_request"
    assert "RecursionError" not in server.log_tail(200_000)


# -- HTTP bodies -------------------------------------------------------------------------------------------


def speech_body(size: int) -> bytes:
    """A speech request's JSON padded with an unknown field to `size` bytes."""
    start = json.dumps({"voice": "alloy", "input": "Hi.", "padding": ""})[:-2]
    return (start + "x" * (size - len(start) - 2) + '"}').encode()


def test_declared_body_over_the_limit_is_refused_before_it_is_read(server):
    head = (
        f"POST {SPEECH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    status, headers, payload = parse_response(raw_exchange(server, head))  # not a byte of the body sent
    assert time.monotonic() - started < BODY_TIMEOUT
    assert status == 413 and headers["connection"] == "close"
    assert_envelope(payload, "payload_too_large")


def test_chunked_body_over_the_limit_is_refused_once_past_it(server):
    chunk = b"x" * 65536
    sent = 0

    def body() -> Iterator[bytes]:  # no length: sent chunked; far more than the limit
        nonlocal sent
        while sent < 64 * MAX_BODY_BYTES:
            sent += len(chunk)
            yield chunk

    response = httpx.post(server.base + SPEECH, content=body(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert_envelope(response.json(), "payload_too_large")
    assert sent < 16 * MAX_BODY_BYTES, "the server stopped reading soon after the limit"


@pytest.mark.parametrize("over", [1, MAX_BODY_BYTES])
def test_async_clients_read_the_413_of_a_body_over_the_limit(server, over):
    """httpx.AsyncClient and the openai SDK's async client write the whole body before they read the answer: the
    server reads what they send of it and drops it, so they get the 413, not a connection reset."""
    body = speech_body(MAX_BODY_BYTES + over)

    async def scenario() -> tuple[httpx.Response, openai.APIStatusError]:
        async with httpx.AsyncClient(base_url=server.base, timeout=TIMEOUT) as client:
            raw = await client.post(SPEECH, content=body, headers={"Content-Type": "application/json"})
        sdk = openai.AsyncOpenAI(api_key="unused", base_url=server.base + "/v1", max_retries=0, timeout=TIMEOUT)
        with pytest.raises(openai.APIStatusError) as refused:
            pad = {"pad": "x" * len(body)}
            await sdk.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", extra_body=pad)
        return raw, refused.value

    raw, refused = asyncio.run(scenario())
    assert raw.status_code == 413 and raw.headers["connection"] == "close"
    assert_envelope(raw.json(), "payload_too_large")
    assert refused.status_code == 413 and refused.code == "payload_too_large"


def test_body_at_the_limit_is_read(server):
    response = httpx.post(
        server.base + SPEECH,
        content=speech_body(MAX_BODY_BYTES),
        headers={"Content-Type": "application/json"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200 and len(response.content) > 0


def test_json_nested_too_deep_is_a_400(server):
    response = httpx.post(
        server.base + SPEECH, content=b"[" * 100_000, headers={"Content-Type": "application/json"}, timeout=TIMEOUT
    )
    assert response.status_code == 400
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    log = server.log_tail(200_000)
    assert "RecursionError" not in log and "Traceback" not in log


def test_slow_body_is_dropped_with_408_after_the_body_timeout(server):
    body = speech_body(64)
    head = (
        f"POST {SPEECH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    raw = raw_exchange(server, head, [body[i : i + 1] for i in range(len(body))], pause=0.5)
    elapsed = time.monotonic() - started
    status, headers, payload = parse_response(raw)
    assert status == 408 and headers["connection"] == "close"
    assert_envelope(payload, "request_timeout")
    assert BODY_TIMEOUT <= elapsed < BODY_TIMEOUT + 1.5, "the whole body's time, not each piece's"


def test_reads_after_the_body_are_not_timed():
    """A streamed response waits on `receive` for the client's disconnect as long as it streams: once the body is
    in, the time limit is off (in process: a live stream long enough would take seconds to generate)."""
    timeout = 0.05

    async def client() -> dict:
        if not sent:
            sent.append(True)
            return {"type": "http.request", "body": b"{}", "more_body": False}
        await asyncio.sleep(4 * timeout)
        return {"type": "http.disconnect"}

    async def app(scope, receive, send) -> None:
        assert (await receive())["type"] == "http.request"
        seen.append((await receive())["type"])

    sent: list[bool] = []
    seen: list[str] = []
    limits = RequestLimits(app, max_websockets=0, body_timeout=timeout, transcription_bytes=25 * 2**20)
    scope = {"type": "http", "method": "POST", "path": SPEECH, "headers": [(b"content-length", b"2")]}
    started = time.monotonic()
    asyncio.run(limits(scope, client, None))
    assert seen == ["http.disconnect"] and time.monotonic() - started >= 4 * timeout


# -- headers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "size"), [(5000, 10), (MAX_HEADERS + 1, 1), (10, 100_000), (1, 1_000_000)], ids=str)
def test_too_many_or_too_large_headers_get_431(server, count, size):
    fields = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"a" * size) for i in range(count))
    raw = raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
    status, headers, payload = parse_response(raw)
    assert status == 431 and headers["connection"] == "close"
    assert_envelope(payload, "request_header_fields_too_large")


def test_ordinary_headers_pass(server):
    headers = {f"X-Filler-{i}": "a" * 100 for i in range(MAX_HEADERS - 10)}
    assert httpx.get(server.base + "/health", headers=headers).status_code == 200


def test_the_gateway_answers_a_body_that_stops_coming_with_408():
    """Behind the gateway the worker's own limit cannot act while the gateway waits for the client's body: the
    gateway times the body itself."""
    forwarded = []

    async def worker(request: httpx.Request) -> httpx.Response:
        forwarded.append(await request.aread())
        return httpx.Response(200)

    async def scenario() -> tuple[list[dict], Outcome, float]:
        pieces = [{"type": "http.request", "body": b'{"input": ', "more_body": True}]

        async def receive() -> dict:
            if pieces:
                return pieces.pop()
            await asyncio.sleep(3600)  # the client sends nothing more

        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/audio/speech", "headers": [(b"content-length", b"40")]}
        outcome = Outcome(0)
        began = time.monotonic()
        async with httpx.AsyncClient(transport=httpx.MockTransport(worker), base_url="http://worker") as client:
            await proxy_http(scope, receive, send, client, outcome, body_timeout=0.5)
        return sent, outcome, time.monotonic() - began

    sent, outcome, seconds = asyncio.run(scenario())
    assert outcome.status == 408 and sent[0]["status"] == 408 and 0.5 <= seconds < 2
    assert json.loads(sent[1]["body"])["error"]["code"] == "request_timeout" and not forwarded
