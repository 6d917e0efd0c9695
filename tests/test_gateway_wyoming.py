"""The gateway's Wyoming port, as real processes: it listens before any worker runs, starts the worker on the first
connection, relays the Wyoming events both ways as they come, answers an `error` event when no worker can start,
and keeps no API key on this port."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from qwen3_tts_server.testing.live_gateway import live_gateway
from qwen3_tts_server.testing.live_server import free_port

TIMEOUT = 300
SAMPLES_PER_FRAME = 1920  # 80 ms at 24 kHz


async def ask(port: int, *events) -> list:
    """Send `events` on one connection and read until audio-stop, info or error."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event.event())
        received = []
        while True:
            event = await asyncio.wait_for(client.read_event(), TIMEOUT)
            assert event is not None, f"the connection closed after {[e.type for e in received]}"
            received.append(event)
            if AudioStop.is_type(event.type) or Info.is_type(event.type) or Error.is_type(event.type):
                return received


def test_worker_starts_on_the_first_wyoming_connection_and_speaks(checkpoint_dirs):
    port = free_port()
    env = {"WYOMING_PORT": str(port), "API_KEY": "not-needed-on-this-port", "IDLE_TIMEOUT": "0"}
    with live_gateway(checkpoint_dirs["custom_voice"], env=env) as gateway:
        assert gateway.health()["gateway"]["starts"] == 0  # the port is open before any worker

        [info] = asyncio.run(ask(port, Describe()))
        [program] = Info.from_event(info).tts
        assert program.supports_synthesize_streaming
        assert "alloy" in {voice.name for voice in program.voices}
        assert gateway.health()["gateway"]["starts"] == 1

        started = time.perf_counter()
        events = asyncio.run(ask(port, Synthesize("Hello from the gateway.", voice=SynthesizeVoice(name="alloy"))))
        assert time.perf_counter() - started < TIMEOUT
        start = AudioStart.from_event(events[0])
        assert (start.rate, start.width, start.channels) == (24000, 2, 1)
        chunks = [AudioChunk.from_event(event) for event in events if AudioChunk.is_type(event.type)]
        assert AudioStop.is_type(events[-1].type) and len(events) == len(chunks) + 2
        samples = sum(len(chunk.audio) for chunk in chunks) // 2
        assert samples > 0 and samples % SAMPLES_PER_FRAME == 0
        assert gateway.health()["gateway"]["starts"] == 1  # the same worker


def test_no_worker_is_a_wyoming_error_event(tmp_path):
    port = free_port()
    with live_gateway(tmp_path / "no-such-checkpoint", env={"WYOMING_PORT": str(port)}):
        [event] = asyncio.run(ask(port, Describe()))
        error = Error.from_event(event)
        assert error.code == "worker_unavailable" and "exited" in error.text


async def refused(port: int, within: float) -> bool:
    """Whether new connections to `port` are refused within `within` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except ConnectionRefusedError:
            return True
        writer.close()
        await asyncio.sleep(0.1)
    return False


def test_sigterm_closes_the_port_and_lets_an_open_connection_finish(checkpoint_dirs):
    """An HTTP request whose body is held back keeps the gateway draining after the signal for as long as the test
    likes: meanwhile the Wyoming port refuses new connections, and the one already open is still answered."""
    port = free_port()
    env = {"WYOMING_PORT": str(port), "SHUTDOWN_GRACE": "60"}
    with live_gateway(checkpoint_dirs["custom_voice"], env=env) as gateway:

        async def speak_after_the_signal() -> tuple[httpx.Response, list]:
            release = asyncio.Event()

            async def held_body():
                yield b'{"voice": "alloy", "input": "Held back.", "response_format": "pcm", '
                await release.wait()
                yield b'"stream": false}'

            async with (
                httpx.AsyncClient(base_url=gateway.base, timeout=TIMEOUT) as http,
                AsyncTcpClient("127.0.0.1", port) as client,
            ):
                await client.write_event(Describe().event())
                assert Info.is_type((await asyncio.wait_for(client.read_event(), TIMEOUT)).type)  # a worker runs
                headers = {"Content-Type": "application/json"}
                held = asyncio.create_task(http.post("/v1/audio/speech", content=held_body(), headers=headers))
                await asyncio.sleep(0.5)  # the request is in flight
                gateway.process.send_signal(signal.SIGTERM)
                assert await refused(port, 5), "the Wyoming port still accepts after SIGTERM"
                release.set()
                response = await held
                await client.write_event(Synthesize("Still here.").event())
                received = []
                while not received or not AudioStop.is_type(received[-1].type):
                    event = await asyncio.wait_for(client.read_event(), TIMEOUT)
                    assert event is not None, "the open connection was cut"
                    received.append(event)
                return response, received

        response, events = asyncio.run(speak_after_the_signal())
        assert response.status_code == 200 and len(response.content) % (2 * SAMPLES_PER_FRAME) == 0
        assert AudioStart.is_type(events[0].type) and any(AudioChunk.is_type(event.type) for event in events)
        assert gateway.process.wait(timeout=90) == 0
