"""ElevenLabs' multi-context WebSocket at its limits, on a live server hosting a speech model and a ForcedAligner,
driven with raw JSON as LiveKit's and Pipecat's plugins send it: a text too long for any context, bad query values,
the five contexts a socket holds, and clients that leave at any moment without an error in the server's log."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import ClientConnection, connect

from qwen3_tts_server.service.speech.elevenlabs import MAX_CONTEXTS
from qwen3_tts_server.testing.live_server import LiveProcess
from test_speech_timestamps import speech_and_aligner

ENV = {"MAX_REQUEST_FRAMES": "30", "IDLE_TIMEOUT": "0", "MAX_PENDING_TEXT": "16384"}
TIMEOUT = 300  # a guard against a hang, not a speed limit
PATH = "/v1/text-to-speech/{}/multi-stream-input"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(both_families) -> Iterator[LiveProcess]:
    yield from speech_and_aligner(both_families, ENV)


def socket_url(server: LiveProcess, query: str = "", voice: str = "ryan") -> str:
    base = server.base.replace("http://", "ws://") + PATH.format(urllib.parse.quote(voice))
    return base + "?output_format=pcm_16000" + (f"&{query}" if query else "")


async def send(ws: ClientConnection, **message) -> None:
    await ws.send(json.dumps(message))


async def receive(ws: ClientConnection) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))


async def until_final(ws: ClientConnection, context: str) -> list[dict]:
    """Messages up to `context`'s isFinal."""
    messages = [await receive(ws)]
    while not (messages[-1].get("isFinal") and messages[-1]["contextId"] == context):
        messages.append(await receive(ws))
    return messages


def test_a_text_longer_than_a_context_may_hold_is_refused_as_too_long_and_the_socket_goes_on(server):
    """Before: "0 characters are waiting ... send it again once more audio has played", which never succeeds."""

    async def scenario():
        async with connect(socket_url(server), max_size=None) as ws:
            refusals = []
            for size in (16_385, 1_000_000):
                await send(ws, text="a" * size, context_id="long")
                refusals.append(await receive(ws))
            await send(ws, text="Hello there.", context_id="long", flush=True)
            await send(ws, context_id="long", close_context=True)
            return refusals, await until_final(ws, "long")

    refusals, spoken = asyncio.run(scenario())
    for size, refusal in zip((16_385, 1_000_000), refusals, strict=True):
        assert refusal["message"] == refusal["error"] == f"text is too long: {size} characters, at most 16384"
        assert refusal["code"] == "invalid_request" and refusal["contextId"] == "long"
    assert any(m.get("audio") for m in spoken) and not any("error" in m for m in spoken)


@pytest.mark.parametrize(
    ("query", "param", "says"),
    [
        ("inactivity_timeout=abc", "inactivity_timeout", "a valid number"),
        ("inactivity_timeout=-1", "inactivity_timeout", "greater than 0"),
        ("inactivity_timeout=0", "inactivity_timeout", "greater than 0"),
        ("inactivity_timeout=181", "inactivity_timeout", "less than or equal to 180"),
        ("inactivity_timeout=nan", "inactivity_timeout", "finite"),
        ("inactivity_timeout=inf", "inactivity_timeout", "finite"),
        ("sync_alignment=perhaps", "sync_alignment", "a valid boolean"),
    ],
)
def test_a_bad_query_value_is_told_after_the_handshake_then_closed_with_1008(server, query, param, says):
    """Before: a 403 at the handshake (abc, perhaps), which reads as a wrong key; a silent normal close (-1, 0),
    a 1006 with a traceback (nan), or taken (181, inf)."""

    async def scenario():
        async with connect(socket_url(server, query)) as ws:
            refusal = await receive(ws)
            await ws.wait_closed()
            return refusal, ws.close_code, ws.close_reason

    refusal, code, reason = asyncio.run(scenario())
    assert refusal["message"].startswith(f"{param}: ") and says in refusal["message"]
    assert refusal["code"] == "invalid_value" and "contextId" not in refusal
    assert code == 1008 and reason.startswith(f"{param}: ")


def test_a_refusal_whose_reason_is_long_in_utf8_still_closes_with_1008(server):
    """A close frame's reason holds 123 bytes: 120 characters of Chinese once broke the close (1006, a traceback)."""

    async def scenario():
        async with connect(socket_url(server, voice="语" * 100)) as ws:
            refusal = await receive(ws)
            await ws.wait_closed()
            return refusal, ws.close_code, ws.close_reason

    refusal, code, reason = asyncio.run(scenario())
    assert "unknown voice" in refusal["message"] and code == 1008
    assert reason.startswith("unknown voice") and len(reason.encode()) <= 123


def test_a_socket_holds_five_contexts_and_a_closed_one_frees_its_place(server):
    """Before: every context opened (10,000 of them, a task each). Now the sixth is refused with an error of its
    own, the others go on, and one's isFinal frees its place."""
    assert MAX_CONTEXTS == 5  # ElevenLabs' own limit

    async def scenario():
        async with connect(socket_url(server)) as ws:
            for number in range(MAX_CONTEXTS):
                await send(ws, text=" ", context_id=f"c{number}")
            for _ in range(1000):
                await send(ws, text=" ", context_id="extra")
            await send(ws, text=5, context_id="sync")  # answered once every message before it is
            refusals = []
            while (message := await receive(ws)).get("contextId") != "sync":
                refusals.append(message)
            await send(ws, context_id="c0", close_context=True)
            freed = await until_final(ws, "c0")
            await send(ws, text="Hello there.", context_id="extra", flush=True)
            await send(ws, context_id="extra", close_context=True)
            spoken = await until_final(ws, "extra")
            await send(ws, text="Still here.", context_id="c1", flush=True)
            await send(ws, context_id="c1", close_context=True)
            still = await until_final(ws, "c1")
            await send(ws, close_socket=True)
            await ws.wait_closed()
            return refusals, freed, spoken, still, ws.close_code

    refusals, freed, spoken, still, code = asyncio.run(scenario())
    assert len(refusals) == 1000 and all(m["contextId"] == "extra" for m in refusals)
    assert refusals[0]["message"].startswith("at most 5 contexts are open at once on a socket: context 'extra'")
    assert refusals[0]["code"] == "invalid_request"
    assert freed == [{"isFinal": True, "contextId": "c0"}]
    for messages in (spoken, still):
        assert any(m.get("audio") for m in messages) and not any("error" in m for m in messages)
    assert code == 1000


async def leave(server: LiveProcess, moment: str, abruptly: bool) -> None:
    """A client that leaves at `moment`: dropping the connection (`abruptly`) or with a close frame."""
    text = "Hello there, my friend. It costs five dollars today! Goodbye now. " * 3
    query = "inactivity_timeout=-1" if moment == "refused" else "sync_alignment=true"
    async with connect(socket_url(server, query)) as ws:
        if moment not in ("opened", "refused"):
            await send(ws, text=text, context_id="x", flush=True)
        if moment in ("audio", "alignment"):
            while not (await receive(ws)).get(moment):
                pass
        elif moment == "close_context":
            await send(ws, context_id="x", close_context=True)
        elif moment == "close_socket":
            await send(ws, close_socket=True)
        if abruptly:
            ws.transport.abort()
        else:
            await ws.close()


def test_a_client_that_leaves_at_any_moment_leaves_no_error_in_the_log(server):
    """Before: the close after the client had gone logged "unexpected error" with a WebSocketDisconnect traceback
    (for each of these 12 sockets)."""
    start = len(server.log_path.read_bytes())
    moments = ("opened", "refused", "audio", "alignment", "close_context", "close_socket")
    for moment in moments:
        for abruptly in (True, False):
            asyncio.run(asyncio.wait_for(leave(server, moment, abruptly), TIMEOUT))

    def log() -> list[str]:
        return server.log_path.read_bytes()[start:].decode(errors="replace").splitlines()

    deadline = time.monotonic() + TIMEOUT
    while sum("multi-stream-input closed" in line for line in log()) < 2 * len(moments):
        assert time.monotonic() < deadline, "every socket is done with"
        time.sleep(0.2)
    while server.health()["active_streams"]:  # every context's engine jobs stopped
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(0.5)  # anything logged as a socket's tasks wind down
    errors = [line for line in log() if "unexpected" in line or "Traceback" in line or '"ERROR"' in line]
    assert errors == []
