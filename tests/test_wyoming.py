"""The Wyoming server (Home Assistant's protocol), driven by the wyoming library's own TCP client: in process (the
app's lifespan on an event loop of its own, so that the engine and the speech made can be watched), then through
`serve --wyoming-port` and the `wyoming` command as real processes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version

import numpy as np
import pytest
from fastapi import FastAPI
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from in_process import make_app
from qwen3_tts_server.api.speech.realtime import parse_request
from qwen3_tts_server.testing.live_server import free_port, live_server
from qwen3_tts_server.wyoming_server import WyomingBackend, WyomingServer
from qwen3_tts_server.wyoming_server.handler import WYOMING

SAMPLES_PER_FRAME = 1920  # 80 ms at 24 kHz
TIMEOUT = 60
TEXT = "Good morning to you, and welcome back."  # two clauses


class Speech:
    """The app's speech service, recording every output it hands out (one per clause spoken)."""

    def __init__(self, app: FastAPI):
        self.service = app.state.services.speech
        self.outputs: list = []
        self.requests: list = []
        speak = self.service.speak

        async def recording(request, clone=None, start=True, **options):
            output = await speak(request, clone, start, **options)
            self.requests.append(request)
            self.outputs.append(output)
            return output

        self.service.speak = recording

    def frames_since(self, start: int) -> int:
        return sum(output.frames for output in self.outputs[start:])


class InProcess:
    """The app, running on `loop` in another thread, seen from the test's thread."""

    def __init__(self, app: FastAPI, loop: asyncio.AbstractEventLoop):
        self.app = app
        self.loop = loop
        self.services = app.state.services
        self.speech = Speech(app)

    @property
    def port(self) -> int:
        return self.app.state.wyoming_port

    def engine_busy(self) -> int:
        """Requests the engine runs, pauses or holds in its queue, and rows it holds."""
        engine = self.services.registry.default.engine
        rows = len(engine.generator.active) if engine.generator is not None else 0
        return engine.active + engine.paused + engine.waiting + rows

    def call(self, coroutine):
        """Run `coroutine` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(TIMEOUT)


@contextmanager
def running(app: FastAPI) -> Iterator[InProcess]:
    """The app's lifespan (engine and Wyoming server) on an event loop of its own in a thread."""
    loop = asyncio.new_event_loop()
    server = InProcess(app, loop)
    started: concurrent.futures.Future = concurrent.futures.Future()
    stop = asyncio.Event()

    async def main() -> None:
        try:
            async with app.router.lifespan_context(app):
                started.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),))
    thread.start()
    try:
        started.result(TIMEOUT)
        yield server
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(TIMEOUT)
        loop.close()


@pytest.fixture(scope="module")
def server(models, tmp_path_factory) -> Iterator[InProcess]:
    # A short frame budget (random weights rarely stop on their own) and two rows: a long text takes a while.
    data = tmp_path_factory.mktemp("wyoming-data")
    app = make_app(models["custom_voice"], wyoming_port=0, max_request_frames=24, max_batch_size=2, data_dir=data)
    with running(app) as live:
        yield live


async def read_until(client: AsyncTcpClient, *types: str) -> list[Event]:
    """Events up to and including the first of one of `types`."""

    async def read() -> list[Event]:
        events = []
        while True:
            event = await client.read_event()
            assert event is not None, f"the server closed the connection after {[e.type for e in events]}"
            assert event.type in WYOMING.sent_by("server"), event.type  # declared (the protocol reference)
            events.append(event)
            if event.type in types:
                return events

    return await asyncio.wait_for(read(), TIMEOUT)


def talk(port: int, *events: Event, until: tuple[str, ...] = ("audio-stop",)) -> list[Event]:
    """Send `events` on a fresh connection and read the answer up to the first event of `until`."""

    async def scenario() -> list[Event]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            for event in events:
                await client.write_event(event)
            return await read_until(client, *until)

    return asyncio.run(scenario())


def types(events: list[Event]) -> list[str]:
    return [event.type for event in events]


def pcm(events: list[Event]) -> np.ndarray:
    audio = b"".join(AudioChunk.from_event(event).audio for event in events if AudioChunk.is_type(event.type))
    return np.frombuffer(audio, dtype="<i2")


def check_audio(events: list[Event], frames: int) -> None:
    """One audio-start at 24 kHz, 16-bit mono, chunks in the same format, one audio-stop; `frames` of audio."""
    kinds = types(events)
    assert kinds[0] == "audio-start" and kinds.count("audio-start") == 1 and kinds.count("audio-stop") == 1
    chunks = kinds[1 : kinds.index("audio-stop")]
    assert chunks and set(chunks) == {"audio-chunk"}
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    for event in events:
        if AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            assert (chunk.rate, chunk.width, chunk.channels) == (24000, 2, 1)
    samples = pcm(events)
    assert frames >= 2 and len(samples) == frames * SAMPLES_PER_FRAME
    assert np.abs(samples.astype(np.int32)).max() > 100, "silent audio"


def test_describe_lists_every_voice_with_its_languages(server):
    server.call(server.services.voices.create_from_description("Narrator", "A calm deep voice.", None))
    event = talk(server.port, Describe().event(), until=("info",))[-1]
    (program,) = Info.from_event(event).tts
    assert program.name == "qwen3-tts" and program.installed and program.supports_synthesize_streaming
    assert program.version == version("qwen3-tts-server") and program.attribution.url
    voices = {voice.name: voice for voice in program.voices}
    assert {"vivian", "ryan", "uncle_fu", "alloy", "nova"} <= set(voices)
    assert voices["vivian"].description == "Vivian" and voices["alloy"].description == "alloy (Ryan)"
    assert voices["ryan"].installed and voices["alloy"].installed
    assert set(voices["vivian"].languages) == {"zh", "en", "ja", "ko", "de", "fr", "ru", "pt", "es", "it"}
    # A library voice is listed; a designed one needs a VoiceDesign model, so it is not installed here.
    (designed,) = [voice for voice in program.voices if voice.description == "Narrator (designed voice)"]
    assert designed.name.startswith("voice_") and not designed.installed


def test_synthesize_streams_the_engines_chunks(server):
    before = len(server.speech.outputs)
    events = talk(server.port, Synthesize(TEXT, voice=SynthesizeVoice(name="vivian")).event())
    check_audio(events, server.speech.frames_since(before))
    assert len(server.speech.outputs) - before == 2  # one engine job per clause
    chunks = [AudioChunk.from_event(event) for event in events if AudioChunk.is_type(event.type)]
    assert chunks[0].samples == SAMPLES_PER_FRAME, "the first chunk is sent after the first frame"


def test_a_voice_by_speaker_and_a_language_code(server):
    before = len(server.speech.outputs)
    voice = {"name": "not-this-one", "speaker": "ryan", "language": "en-US"}
    events = talk(server.port, Event("synthesize", {"text": "See you soon.", "voice": voice}))
    check_audio(events, server.speech.frames_since(before))
    request = server.speech.requests[before]
    assert (request.voice, request.language, request.response_format) == ("ryan", "english", "pcm")


def test_an_unknown_voice_is_an_error_and_the_connection_goes_on(server):
    async def scenario():
        async with AsyncTcpClient("127.0.0.1", server.port) as client:
            await client.write_event(Synthesize("Hello.", voice=SynthesizeVoice(name="nobody")).event())
            refused = await read_until(client, "audio-stop")
            await client.write_event(Synthesize("Hello.", voice=SynthesizeVoice(name="alloy")).event())
            return refused, await read_until(client, "audio-stop")

    refused, spoken = asyncio.run(scenario())
    assert types(refused) == ["error", "audio-stop"]
    error = Error.from_event(refused[0])
    assert error.code == "invalid_request"
    assert error.text.startswith("unknown voice 'nobody'; available: ") and "vivian" in error.text
    assert types(spoken)[0] == "audio-start" and types(spoken).count("audio-chunk") > 0


def test_requests_sent_together_are_answered_in_order(server):
    before = len(server.speech.outputs)
    events = talk(
        server.port,
        Synthesize(TEXT).event(),
        Synthesize("Hello.", voice=SynthesizeVoice(name="nobody")).event(),  # refused at once, answered in turn
        Describe().event(),
        until=("info",),
    )
    kinds = types(events)
    first_stop = kinds.index("audio-stop")
    check_audio(events[: first_stop + 1], server.speech.frames_since(before))
    assert kinds[first_stop + 1 :] == ["error", "audio-stop", "info"]


def test_streamed_synthesis_ignores_the_compatibility_copy(server):
    before = len(server.speech.outputs)
    chunks = ["Good morning", " to you, and wel", "come back."]
    events = talk(
        server.port,
        SynthesizeStart(voice=SynthesizeVoice(name="serena")).event(),
        *[SynthesizeChunk(chunk).event() for chunk in chunks],
        Synthesize(TEXT, voice=SynthesizeVoice(name="serena")).event(),  # Home Assistant's copy of the same text
        SynthesizeStop().event(),
        until=("synthesize-stopped",),
    )
    assert types(events)[-2:] == ["audio-stop", "synthesize-stopped"]
    check_audio(events[:-1], server.speech.frames_since(before))
    assert [request.text for request in server.speech.requests[before:]] == [
        "Good morning to you,",
        "and welcome back.",
    ]
    assert {request.voice for request in server.speech.requests[before:]} == {"serena"}


def test_streamed_speech_starts_before_the_text_is_finished(server):
    async def scenario():
        async with AsyncTcpClient("127.0.0.1", server.port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk("Good morning to you, and").event())
            first = await read_until(client, "audio-chunk")  # nothing more is sent until audio arrives
            await client.write_event(SynthesizeChunk(" welcome back.").event())
            await client.write_event(SynthesizeStop().event())
            return first, await read_until(client, "synthesize-stopped")

    first, rest = asyncio.run(scenario())
    assert types(first) == ["audio-start", "audio-chunk"]
    assert types(rest)[-2:] == ["audio-stop", "synthesize-stopped"] and "audio-start" not in types(rest)


def test_a_refused_stream_still_ends_with_synthesize_stopped(server):
    before = len(server.speech.outputs)
    events = talk(
        server.port,
        SynthesizeStart(voice=SynthesizeVoice(name="nobody")).event(),
        SynthesizeChunk("Hello there, my friend. How are you?").event(),
        SynthesizeStop().event(),
        until=("synthesize-stopped",),
    )
    assert types(events) == ["error", "synthesize-stopped"]
    assert Error.from_event(events[0]).text.startswith("unknown voice 'nobody'")
    assert len(server.speech.outputs) == before, "nothing of a refused stream is spoken"


def test_bad_events_are_errors_and_the_connection_stays_usable(server):
    cases = [
        (Event("transcribe-this", {}), ["error"], "unknown event type 'transcribe-this'"),
        (Event("synthesize", {}), ["error", "audio-stop"], "`text` must be a string"),
        (Event("synthesize", {"text": ""}), ["error", "audio-stop"], "nothing to speak: the text is empty"),
        (Event("synthesize", {"text": "Hi.", "voice": "vivian"}), ["error", "audio-stop"], "`voice` must be an object"),
        (
            Event("synthesize", {"text": "Hi.", "voice": {"language": "klingon"}}),
            ["error", "audio-stop"],
            "unknown language 'klingon'; valid languages: auto, chinese, english",
        ),
        (Event("synthesize", {"text": "x" * 4097}), ["error", "audio-stop"], "text is too long"),
        (SynthesizeChunk("Hi.").event(), ["error"], "synthesize-chunk outside a streamed synthesis"),
        (SynthesizeStop().event(), ["error", "synthesize-stopped"], "synthesize-stop without synthesize-start"),
    ]

    async def scenario():
        answers = []
        async with AsyncTcpClient("127.0.0.1", server.port) as client:
            for event, expected, _ in cases:
                await client.write_event(event)
                answers.append(await read_until(client, expected[-1]))
            await client.write_event(Describe().event())
            return answers, await read_until(client, "info")

    answers, info = asyncio.run(scenario())
    for (event, expected, message), answer in zip(cases, answers, strict=True):
        assert types(answer) == expected, event
        error = Error.from_event(answer[0])
        assert message in error.text and error.code in ("invalid_request", "invalid_value"), (event, error)
    assert Info.from_event(info[-1]).tts[0].voices


def test_a_client_that_leaves_mid_synthesis_frees_its_rows(server):
    # 48 clauses of up to 24 frames on two rows: seconds of work, most of it still to do when the client leaves.
    text = " ".join(f"Sentence number {n} is here, and it goes on." for n in range(24))
    before = len(server.speech.outputs)

    async def scenario() -> int:
        async with AsyncTcpClient("127.0.0.1", server.port) as client:
            await client.write_event(Synthesize(text, voice=SynthesizeVoice(name="aiden")).event())
            await read_until(client, "audio-chunk")
            # The clauses are handed to the engine one after another: on a busy machine the first audio can come
            # before the last of them is in.
            deadline = time.monotonic() + 10
            while len(server.speech.outputs) - before < 48 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return server.engine_busy()

    busy_when_left = asyncio.run(scenario())
    left = time.monotonic()
    assert busy_when_left > 0 and len(server.speech.outputs) - before == 48
    while server.engine_busy() and time.monotonic() < left + 10:
        time.sleep(0.02)
    assert server.engine_busy() == 0
    assert time.monotonic() - left < 2.0, "the jobs were cut when the client left, not run to their end"
    # The server goes on serving.
    assert types(talk(server.port, Synthesize("Still here.").event()))[-1] == "audio-stop"


def test_an_unreadable_event_closes_only_its_connection(server):
    async def scenario() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b'{"data": {"text": "no type"}}\n')
        await writer.drain()
        closed = await asyncio.wait_for(reader.read(), TIMEOUT)  # the server closes it without an answer
        writer.close()
        return closed

    assert asyncio.run(scenario()) == b""
    assert types(talk(server.port, Describe().event(), until=("info",))) == ["info"]


def test_zeroconf_advertises_the_port_unless_it_is_on_the_loopback(server):
    services = server.services
    backend = WyomingBackend(services.speech, services.voices, services.registry, parse_request, 1000)

    async def advertise(host: str) -> tuple[str | None, object]:
        from zeroconf.asyncio import AsyncZeroconf

        async with WyomingServer(backend, host, 0, zeroconf=True) as wyoming:
            if wyoming.advertised is None:
                return None, None
            browser = AsyncZeroconf()
            try:
                name = f"{wyoming.advertised}._wyoming._tcp.local."
                info = await browser.async_get_service_info("_wyoming._tcp.local.", name, timeout=3000)
            finally:
                await browser.async_close()
            return wyoming.advertised, (info.port if info else None, wyoming.port)

    assert asyncio.run(advertise("127.0.0.1")) == (None, None)
    name, ports = asyncio.run(advertise("0.0.0.0"))
    if name is None:
        pytest.skip("no multicast-capable interface here")
    assert name.startswith("qwen3-tts-") and ports[0] == ports[1]


def test_serve_with_a_wyoming_port(checkpoint_dirs):
    port = free_port()
    with live_server(checkpoint_dirs["custom_voice"], "--wyoming-port", str(port), "--max-request-frames", "16"):
        events = talk(port, Describe().event(), Synthesize(TEXT).event(), until=("audio-stop",))
    assert types(events)[0] == "info" and Info.from_event(events[0]).tts[0].voices
    assert types(events)[1] == "audio-start" and types(events)[-1] == "audio-stop"
    samples = pcm(events)
    assert len(samples) and len(samples) % SAMPLES_PER_FRAME == 0


def test_the_wyoming_command_serves_and_stops_on_sigterm(checkpoint_dirs, tmp_path):
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DATA_DIR": str(tmp_path), "WYOMING_PORT": str(port)}
    command = [sys.executable, "-m", "qwen3_tts_server", "wyoming", "--model", str(checkpoint_dirs["custom_voice"])]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)

    async def describe() -> Info:
        deadline = time.monotonic() + 120
        while True:
            try:
                async with AsyncTcpClient("127.0.0.1", port) as client:
                    await client.write_event(Describe().event())
                    return Info.from_event((await read_until(client, "info"))[-1])
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the wyoming command did not start"
                await asyncio.sleep(0.2)

    try:
        assert asyncio.run(describe()).tts[0].supports_synthesize_streaming
    finally:
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, log
    assert "wyoming listening" in log


def test_a_client_that_leaves_in_the_middle_of_an_event_leaves_no_error_behind(server, caplog):
    """An event's header promises data the client never sends: the connection ends quietly, no task's exception
    ("Task exception was never retrieved ... IncompleteReadError") left in the log."""

    async def scenario() -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b'{"type": "synthesize", "data_length": 1000}\n{"text": "cut sh')
        await writer.drain()
        writer.close()

    with caplog.at_level(logging.INFO):
        asyncio.run(scenario())
        deadline = time.monotonic() + TIMEOUT
        while "left in the middle of an event" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        gc.collect()  # a task whose exception nobody retrieved says so when it is collected
        time.sleep(0.2)
    assert "left in the middle of an event" in caplog.text
    assert "never retrieved" not in caplog.text and "IncompleteReadError" not in caplog.text
    assert types(talk(server.port, Describe().event(), until=("info",))) == ["info"]
