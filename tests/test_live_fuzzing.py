"""Hostile and odd messages on the live protocols (`WS /ws/transcribe`, `WS /v1/realtime?intent=transcription`),
sent with raw websockets to a live server hosting a tiny transcriber: each costs its protocol's error (a 400, never a
closed session), and the session goes on, a probe after each message answered and audio after them all transcribed.
First the cases that once killed a session (wrong types for the fields, JSON nested too deep, numbers too large),
then hypothesis's own messages: wrong types for every field, NaN and infinities, unknown actions and event types."""

from __future__ import annotations

import asyncio
import base64
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import server  # noqa: F401 (a fixture)

TIMEOUT = 60
DEEP = "[" * 100_000 + "]" * 100_000
PCM = (voiced_glide(2.5, pitch=150.0) * 32767).astype("<i2").tobytes()  # 16 kHz
PCM24K = (voiced_glide(2.5, 24000, pitch=150.0) * 32767).astype("<i2").tobytes()
RESET, RESET_ANSWER = json.dumps({"action": "reset"}), {"status": "buffer_reset"}
CLEAR, CLEARED = json.dumps({"type": "input_audio_buffer.clear"}), "input_audio_buffer.cleared"


async def answers(ws: ClientConnection, message: str | bytes, probe: str, answered) -> list[dict]:
    """What `message` is answered with: the frames before `probe`'s answer (which shows the session alive)."""
    await ws.send(message)
    await ws.send(probe)
    frames = []
    while not answered(frame := json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))):
        frames.append(frame)
    return frames


async def earlier_answers(ws: ClientConnection, message: str | bytes) -> list[dict]:
    return await answers(ws, message, RESET, lambda frame: frame == RESET_ANSWER)


async def realtime_answers(ws: ClientConnection, message: str | bytes) -> list[dict]:
    return await answers(ws, message, CLEAR, lambda event: event["type"] == CLEARED)


def config(**fields) -> str:
    return json.dumps({"action": "config", **fields})


def update(session: dict) -> str:
    return json.dumps({"type": "session.update", "session": {"type": "transcription", **session}})


def audio_input(**fields) -> dict:
    return {"audio": {"input": fields}}


def is_earlier_error(frames: list[dict]) -> bool:
    return len(frames) == 1 and set(frames[0]) == {"code", "message", "statusCode"} and frames[0]["statusCode"] == 400


def is_realtime_error(events: list[dict]) -> bool:
    return len(events) == 1 and events[0]["type"] == "error" and events[0]["error"]["type"] == "invalid_request_error"


EARLIER_CASES = {
    config(language=123): "INVALID_VALUE",
    config(language=["en"]): "INVALID_VALUE",
    config(use_server_vad=[True]): "INVALID_VALUE",
    DEEP: "INVALID_JSON",
    '{"action": "config", "language": ' + "9" * 5000 + "}": "INVALID_JSON",  # past Python's integer digits
    "NaN": "INVALID_JSON",
    "flush": "INVALID_JSON",  # the bare word, as some bridges send it
    json.dumps({"action": ["flush"]}): "UNKNOWN_ACTION",
}
REALTIME_CASES = {
    DEEP: "event",
    '{"type": "session.update", "session": ' + DEEP + "}": "event",
    update(audio_input(format={"type": "audio/pcm", "rate": 1e999})): "session.audio.input.format.rate",
    update(audio_input(format={"type": "audio/pcm", "rate": float("nan")})): "session.audio.input.format.rate",
    update(audio_input(turn_detection={"type": "server_vad", "silence_duration_ms": 1e999})): (
        "session.turn_detection.silence_duration_ms"
    ),
    update(audio_input(turn_detection={"type": "server_vad", "prefix_padding_ms": 1e300})): (
        "session.turn_detection.prefix_padding_ms"  # a padding is audio held in memory
    ),
    update(audio_input(turn_detection={"type": "server_vad", "threshold": True})): "session.turn_detection.threshold",
    update(audio_input(transcription={"model": 123})): "session.input_audio_transcription.model",
    update(audio_input(transcription={"language": ["en"]})): "session.input_audio_transcription.language",
    update(audio_input(transcription={"prompt": {"text": "hi"}})): "session.input_audio_transcription.prompt",
    update(audio_input(transcription="whisper-1")): "session.input_audio_transcription",
    update({"input_audio_format": ["pcm16"]}): "session.input_audio_format",
    json.dumps({"type": ["session.update"]}): "type",
    json.dumps({"type": "input_audio_buffer.append", "audio": 123}): "audio",
}


def test_what_once_killed_a_session_is_an_error_and_the_session_goes_on(server):  # noqa: F811
    base = server.base.replace("http", "ws", 1)

    async def scenario():
        async with connect(f"{base}/ws/transcribe?use_server_vad=false") as ws:
            await ws.recv()  # the greeting
            earlier = {case: await earlier_answers(ws, case) for case in EARLIER_CASES}
            earlier[b"\x01"] = await earlier_answers(ws, b"\x01")  # half a sample: held for the next frame
            await ws.send(PCM[1:])  # ... and joined with it
            await ws.send(json.dumps({"action": "flush"}))
            while not (final := json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))["is_final"]:
                pass
        async with connect(f"{base}/v1/realtime?intent=transcription") as ws:
            await ws.recv()  # session.created
            realtime = {case: await realtime_answers(ws, case) for case in REALTIME_CASES}
            realtime[b"\x00\x01"] = await realtime_answers(ws, b"\x00\x01")  # binary (raw PCM by mistake): an error
            await ws.send(update(audio_input(turn_detection=None)))
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(PCM24K).decode()}))
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            while (event := json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))["type"] != "error" and not (
                event["type"].endswith(".completed")
            ):
                pass
        return earlier, final, realtime, event

    earlier, final, realtime, completed = asyncio.run(scenario())
    for case, code in EARLIER_CASES.items():
        assert is_earlier_error(earlier[case]) and earlier[case][0]["code"] == code, (case[:80], earlier[case])
    assert "language: Input should be a valid string, not 123" in earlier[config(language=123)][0]["message"]
    assert earlier[b"\x01"] == [] and final["text"]
    for case, param in REALTIME_CASES.items():
        assert is_realtime_error(realtime[case]) and realtime[case][0]["error"]["param"] == param, (case[:80], param)
    assert is_realtime_error(realtime[b"\x00\x01"]) and realtime[b"\x00\x01"][0]["error"]["param"] == "event"
    assert completed["type"] == "conversation.item.input_audio_transcription.completed" and completed["transcript"]


# Hypothesis's messages: a valid message with one of its fields (any, at any depth) given an odd value: any JSON
# value (NaN and infinities included, which Python's JSON writes and reads), or one at the edges; and messages that
# are not objects at all.
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
ODD = ANY_JSON | st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, 2**70, -1, 0, True, "", [], {}])
NOT_OBJECTS = ANY_JSON.filter(lambda value: not isinstance(value, dict)).map(json.dumps) | st.text(max_size=20)

EARLIER_FIELDS = [({"action": "config"}, (key,)) for key in ("action", "language", "use_server_vad")]
BETA = {
    "type": "transcription_session.update",
    "session": {"input_audio_transcription": {}, "turn_detection": {"type": "server_vad"}},
}
CURRENT = {
    "type": "session.update",
    "session": {
        "type": "transcription",
        "audio": {
            "input": {"format": {"type": "audio/pcm"}, "transcription": {}, "turn_detection": {"type": "server_vad"}}
        },
    },
}
TRANSCRIPTION_KEYS = ("model", "language", "prompt")
TURN_KEYS = ("type", "threshold", "prefix_padding_ms", "silence_duration_ms")
APPEND = {"type": "input_audio_buffer.append"}
REALTIME_FIELDS = [
    *((BETA, path) for path in [("session",), ("session", "input_audio_format"), ("session", "turn_detection")]),
    *((BETA, ("session", "input_audio_transcription", key)) for key in ("", *TRANSCRIPTION_KEYS)),
    *((BETA, ("session", "turn_detection", key)) for key in TURN_KEYS),
    *((CURRENT, ("session", *path)) for path in [("type",), ("audio",), ("audio", "input")]),
    *((CURRENT, ("session", "audio", "input", "format", key)) for key in ("", "type", "rate")),
    *((CURRENT, ("session", "audio", "input", "transcription", key)) for key in ("", *TRANSCRIPTION_KEYS)),
    *((CURRENT, ("session", "audio", "input", "turn_detection", key)) for key in ("", *TURN_KEYS)),
    (APPEND, ("audio",)),
    ({}, ("type",)),
]


def with_value(case: tuple[dict, tuple[str, ...]], value: object) -> str:
    """The message `case` names, its field at the case's path (a last key "": the object holding them) `value`."""
    message, path = json.loads(json.dumps(case[0])), [key for key in case[1] if key]
    place = message
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return json.dumps(message)


def no_action(text: str) -> bool:
    """Whether `text` names neither action that is no error: a flush, or a reset (the probe's own message; hypothesis
    draws text from the project's string constants too, and one of them is the reset message whole)."""
    return "flush" not in text and "reset" not in text


EARLIER_FIELD_VALUES = (
    st.tuples(st.sampled_from(EARLIER_FIELDS), ODD).map(lambda drawn: with_value(*drawn)).filter(no_action)
)
REALTIME_FIELD_VALUES = (
    st.tuples(st.sampled_from(REALTIME_FIELDS), ODD)
    .filter(lambda drawn: not (drawn[0][0] is APPEND and isinstance(drawn[1], str)))  # audio: speech events
    .map(lambda drawn: with_value(*drawn))
)
# three in four a field's odd value
EARLIER_MESSAGES = st.one_of(*[EARLIER_FIELD_VALUES] * 3, NOT_OBJECTS.filter(no_action))
REALTIME_MESSAGES = st.one_of(*[REALTIME_FIELD_VALUES] * 3, NOT_OBJECTS)


def fuzz(url: str, messages: st.SearchStrategy, exchange, answered_well, after) -> None:
    """Hypothesis's `messages` over one session at `url`, each answered well, then `after(ws)`: the session still
    serves."""
    loop = asyncio.new_event_loop()
    try:
        ws = loop.run_until_complete(connect(url))
        loop.run_until_complete(asyncio.wait_for(ws.recv(), TIMEOUT))  # the greeting

        closed_after: list[str] = []  # the message the session did not survive (what hypothesis shrinks is not)

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
        @given(message=messages)
        def answered(message: str) -> None:
            assert not closed_after, f"the session closed after {closed_after[0][:200]!r}"
            try:
                frames = loop.run_until_complete(exchange(ws, message))
            except ConnectionClosed:
                closed_after.append(message)
                raise
            assert answered_well(frames), (message[:200], frames)

        answered()
        loop.run_until_complete(after(ws))
        loop.run_until_complete(ws.close())
    finally:
        loop.close()


def earlier_answered_well(frames: list[dict]) -> bool:
    return is_earlier_error(frames) or [frame.get("status") for frame in frames] == ["configured"]


def realtime_answered_well(events: list[dict]) -> bool:
    return is_realtime_error(events) or [event["type"] for event in events] == ["session.updated"]


def test_hypothesis_messages_on_ws_transcribe_cost_an_error_never_the_session(server):  # noqa: F811
    async def transcribed(ws: ClientConnection) -> None:
        await ws.send(config(language="auto", use_server_vad=False))
        await ws.send(PCM)
        await ws.send(json.dumps({"action": "flush"}))
        while not (frame := json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))).get("is_final"):
            pass
        assert frame["text"]

    url = server.base.replace("http", "ws", 1) + "/ws/transcribe?use_server_vad=false"
    fuzz(url, EARLIER_MESSAGES, earlier_answers, earlier_answered_well, transcribed)


def test_hypothesis_events_on_the_realtime_route_cost_an_error_never_the_session(server):  # noqa: F811
    async def transcribed(ws: ClientConnection) -> None:
        heard = {"language": None, "prompt": ""}
        session = audio_input(format={"type": "audio/pcm", "rate": 24000}, turn_detection=None, transcription=heard)
        await ws.send(update(session))
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(PCM24K).decode()}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        while not (event := json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))["type"].endswith(".completed"):
            assert event["type"] != "error", event
        assert event["transcript"]

    url = server.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
    fuzz(url, REALTIME_MESSAGES, realtime_answers, realtime_answered_well, transcribed)
