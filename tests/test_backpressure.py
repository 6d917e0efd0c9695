"""Backpressure: a stream whose client has not taken STREAM_BUFFER_SECONDS of its audio pauses its engine row
(skipping steps, keeping its place and cache) and resumes when the client catches up; paused rows change no
other row's codes and make their own codes as if never paused; a client that takes nothing for the request's
time limit is dropped with its row freed; time paused for a slow client does not count against the limit."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import replace

import httpx
import numpy as np
import pytest
import uvicorn

from qwen3_tts_server.engine.jobs import Audience, RequestClock
from qwen3_tts_server.errors import RequestTimeoutError
from qwen3_tts_server.model.step_graphs import SPAN_STEP
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.prompt import SpeechInput
from qwen3_tts_server.server import listening_socket
from qwen3_tts_server.testing.live_server import live_process
from step_schedule import CHINESE, SHORT
from test_client_leaves import wait_for
from test_engine import REQUESTS, collect, job_for, run_engine

pytestmark = pytest.mark.slow

# Long enough that its prompt alone passes SPAN_STEP cache positions while the other rows stay below it.
LONG = SpeechInput(
    " ".join(["The quick brown fox jumps over the lazy dog near the quiet river bank."] * 12), "English", "Vivian"
)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_paused_rows_change_no_codes_and_resume_where_they_stopped(models, static):
    model = models["custom_voice"]

    def run(pauses: dict[int, range]) -> dict[int, np.ndarray]:
        generator = FrameGenerator(model.talker, rows=4, initial_capacity=64, static=static)
        requests = [
            (LONG, model.sampling(seed=7)),
            (SHORT, model.sampling(seed=9, temperature=1.1)),
            (CHINESE, model.sampling().greedy()),
        ]
        for request, params in requests:
            generator.add(model.prompts.build(request), params, 40, suppress_eos=True)
        # The paused row 0 is longer than SPAN_STEP while the rows that step are not: a static step's span must
        # still cover it, or its masked write would land inside its own cache.
        assert generator.cache.lengths[0] > SPAN_STEP > max(generator.cache.lengths[1:3])
        codes: dict[int, list[np.ndarray]] = {row: [] for row in range(3)}
        for step in range(200):
            if not generator.active:
                break
            for row, steps in pauses.items():
                if step == steps.start:
                    generator.pause(row)
                elif step == steps.stop:
                    generator.resume(row)
            frames = generator.step() if generator.stepping else []
            assert not {frame.row for frame in frames} & generator.paused, "a paused row made a frame"
            for frame in frames:
                codes[frame.row].append(frame.codes.cpu().numpy())
        return {row: np.stack(frames) for row, frames in codes.items()}

    straight = run({})
    paused = run({0: range(3, 25), 2: range(10, 14)})
    for row in range(3):
        np.testing.assert_array_equal(paused[row], straight[row], err_msg=f"row {row}")
    assert all(len(codes) == 40 for codes in paused.values())


BUFFER_SECONDS = 0.4  # 5 frames of 80 ms


async def made(stream, frames: int) -> None:
    """Until the engine has delivered `frames` frames of `stream`."""
    while stream._handle.frames_sent < frames:
        await asyncio.sleep(0.01)


def test_a_client_that_stops_reading_pauses_its_row_and_others_run_at_full_speed(models):
    model = models["custom_voice"]
    params = [model.sampling(seed=3), model.sampling(seed=4)]
    solo = [
        model.generate([request], p, max_frames=60, suppress_eos=True)[0].codes
        for request, p in zip(REQUESTS[:2], params, strict=True)
    ]

    async def scenario(engine):
        reader_away = engine.submit(job_for(model, REQUESTS[0], params[0], max_frames=60, suppress_eos=True))
        first = await anext(reader_away)  # the client has begun listening, then takes nothing more for a while
        other = await collect(engine.submit(job_for(model, REQUESTS[1], params[1], max_frames=60, suppress_eos=True)))
        # Its last audio reaches the client as the engine thread frees its row: wait for that, not a step longer.
        await asyncio.wait_for(until(lambda: engine.active == 0), 30)
        seen = (engine.active, engine.paused, engine.generator.stepping, engine.generator.active)
        held = reader_away._handle.frames_sent - first.frames
        codes, _, _ = await collect(reader_away)  # the client comes back: the row resumes and finishes
        away = np.concatenate([first.codes, codes])
        await asyncio.wait_for(until(lambda: engine.active == 0), 30)  # as above: its row is freed after its audio
        return other, away, seen, held, (engine.active, engine.paused, engine.generator.active)

    other, away, seen, held, after = run_engine(model, scenario, stream_buffer_seconds=BUFFER_SECONDS)
    np.testing.assert_array_equal(other[0], solo[1])
    np.testing.assert_array_equal(away, solo[0])
    assert seen == (0, 1, [], [0]), "the paused row holds its place, steps no more and is not counted as active"
    assert 5 <= held <= 5 + 8, "at most the buffer and one chunk were made ahead of the client"
    assert after == (0, 0, [])


def test_a_client_that_takes_nothing_for_the_time_limit_is_dropped_with_its_audio(models):
    model = models["custom_voice"]

    # The limit also bounds the request's time before it pauses (a prefill and 5 frames, whose first oneDNN
    # products of new shapes take a while): long enough for them on a busy machine.
    limit = 2.0

    async def scenario(engine):
        stream = engine.submit(
            job_for(model, REQUESTS[0], model.sampling(seed=5), max_frames=500, suppress_eos=True), RequestClock(limit)
        )
        await anext(stream)
        await asyncio.wait_for(until(lambda: engine.paused), 30)
        await asyncio.sleep(limit + 0.3)
        with pytest.raises(RequestTimeoutError, match=f"took no audio for {limit:g} s"):
            await anext(stream)  # the audio it held was dropped: the error comes first
        return engine.active, engine.paused, engine.generator.active

    assert run_engine(model, scenario, stream_buffer_seconds=BUFFER_SECONDS) == (0, 0, [])


def test_time_paused_for_a_slow_client_does_not_count_against_the_limit(models):
    """The limit is three times what making the 40 frames takes on this machine (busy or not), and the client takes
    twice the limit to read them: past it only with the paused time counted."""
    model = models["custom_voice"]
    params = model.sampling(seed=6)
    started = time.perf_counter()
    solo = model.generate([REQUESTS[2]], params, max_frames=40, suppress_eos=True)[0].codes
    limit = max(1.0, 3 * (time.perf_counter() - started))

    async def scenario(engine):
        clock = RequestClock(limit)
        chunks = []
        async for chunk in engine.submit(job_for(model, REQUESTS[2], params, max_frames=40, suppress_eos=True), clock):
            chunks.append(chunk)
            await asyncio.sleep(limit / 4)  # 8 chunks: twice the limit, mostly paused
        return chunks

    chunks = run_engine(model, scenario, stream_buffer_seconds=BUFFER_SECONDS)
    np.testing.assert_array_equal(np.concatenate([c.codes for c in chunks]), solo)
    assert chunks[-1].elapsed_seconds > limit and chunks[-1].finish_reason == "length"


def test_a_client_that_stops_reading_a_long_text_costs_no_steps_once_its_buffer_is_full(models):
    """Two segments of one request (one clock, as a long text's): the client takes a chunk of the first and stops.
    The second segment, made meanwhile, counts against the same buffer: both rows pause with at most the buffer and
    a chunk of each made ahead, where the second used to run to its end (60 frames) with nobody listening."""
    model = models["custom_voice"]
    limit = round(BUFFER_SECONDS / model.frames_to_seconds(1))

    async def scenario(engine):
        steps: list[float] = []
        engine.add_step_listener(lambda seconds, _: steps.append(seconds))
        clock = RequestClock(None)
        first = engine.submit(
            job_for(model, REQUESTS[0], model.sampling(seed=5), max_frames=60, suppress_eos=True), clock
        )
        following = job_for(model, REQUESTS[1], model.sampling(seed=6), max_frames=60, suppress_eos=True)
        second = engine.submit(replace(following, continuation=True), clock)
        taken = await anext(first)
        await asyncio.wait_for(until(lambda: engine.paused == 2), 30)
        before = len(steps)
        await asyncio.sleep(0.5)
        held = first._handle.frames_sent - taken.frames + second._handle.frames_sent
        return held, len(steps) - before, engine.active

    held, steps_while_stalled, active = run_engine(model, scenario, stream_buffer_seconds=BUFFER_SECONDS)
    assert limit <= held <= limit + 2 * 8, "the buffer and at most a chunk of each segment were made ahead"
    assert (steps_while_stalled, active) == (0, 0), "a stalled client's request takes no steps"


async def until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_a_finished_segment_whose_audio_waits_counts_against_the_next(models):
    """A long text's first segment ends while its client, stalled, has not taken its audio: that audio still fills
    the buffer, so the next segment (made ahead) pauses at once, where it used to run to its end with nobody
    listening (the client had taken nothing of it)."""
    model = models["custom_voice"]
    limit = round(BUFFER_SECONDS / model.frames_to_seconds(1))

    async def scenario(engine):
        steps: list[float] = []
        engine.add_step_listener(lambda seconds, _: steps.append(seconds))
        clock = RequestClock(None)
        first = engine.submit(  # short enough to end before its own audio fills the buffer
            job_for(model, REQUESTS[0], model.sampling(seed=5), max_frames=limit, suppress_eos=True), clock
        )
        following = job_for(model, REQUESTS[1], model.sampling(seed=6), max_frames=60, suppress_eos=True)
        second = engine.submit(replace(following, continuation=True), clock)
        taken = await anext(first)
        await asyncio.wait_for(until(lambda: first._handle.frames_sent == limit and engine.paused == 1), 30)
        before = len(steps)
        await asyncio.sleep(0.5)
        stalled = (len(steps) - before, second._handle.frames_sent)
        heard = [taken, *[chunk async for chunk in first], *[chunk async for chunk in second]]  # the client is back
        return stalled, sum(chunk.frames for chunk in heard)

    (steps_while_stalled, second_made), heard = run_engine(model, scenario, stream_buffer_seconds=BUFFER_SECONDS)
    assert steps_while_stalled == 0, "a stalled client's request takes no steps"
    assert second_made <= 8, "nothing of the next segment beyond a chunk: the first's waiting audio fills the buffer"
    assert heard == limit + 60, "the client that comes back hears both segments whole"


def test_the_requests_of_one_audience_share_its_buffer_and_play_in_turn(models):
    """A WebSocket session's clauses are requests of their own (each its own time limit) that play to one listener:
    the clauses after the one heard pause once the audio waiting for it fills the buffer, and the one heard goes on
    whatever the later ones hold, so a client that keeps listening hears every clause to its end."""
    model = models["custom_voice"]
    limit = round(BUFFER_SECONDS / model.frames_to_seconds(1))

    async def scenario(engine):
        audience = Audience()
        clauses = [
            engine.submit(
                job_for(model, request, model.sampling(seed=n), max_frames=40, suppress_eos=True),
                RequestClock(None, audience),
            )
            for n, request in enumerate(REQUESTS[:3])
        ]
        first = await anext(clauses[0])
        await asyncio.wait_for(until(lambda: engine.paused == 3), 30)
        ahead = sum(clause._handle.frames_sent for clause in clauses) - first.frames
        frames = [first.frames + sum([chunk.frames async for chunk in clauses[0]])]
        for clause in clauses[1:]:
            frames.append(sum([chunk.frames async for chunk in clause]))
        return ahead, frames

    ahead, frames = run_engine(model, scenario, stream_buffer_seconds=BUFFER_SECONDS)
    assert limit <= ahead <= limit + 3 * 8, "the buffer and at most a chunk of each clause were made ahead"
    assert frames == [40, 40, 40], "each clause heard whole, in turn"


def test_without_a_bound_the_engine_runs_ahead_of_the_client(models):
    model = models["custom_voice"]

    async def scenario(engine):
        stream = engine.submit(job_for(model, REQUESTS[0], model.sampling(seed=5), max_frames=60, suppress_eos=True))
        first = await anext(stream)
        await asyncio.wait_for(made(stream, 60), 30)  # all made while the client took one frame
        codes, _, _ = await collect(stream)
        return engine.paused, first.frames + len(codes)

    assert run_engine(model, scenario, stream_buffer_seconds=0) == (0, 60)


# Sixteen sentences, four segments of some 250 frames: 7.5 MB of PCM at 48 kHz, more than the server's socket send
# buffer takes (it grows to 4 MB on loopback) while the client reads nothing.
LONG_TEXT = " ".join(
    f"Sentence {letter} keeps the line open while the listener takes its time." for letter in "abcdefgh" * 2
)
PCM_48K_FRAME_BYTES = 3840 * 2
LIVE_BODY = {"input": LONG_TEXT, "voice": "vivian", "response_format": "pcm", "sample_rate": 48000, "seed": 1}
FRAMES_TO_FILL_SOCKETS = 600  # 4.6 MB of 48 kHz PCM: loopback's socket buffers held 543 frames here


async def health_once(client: httpx.AsyncClient, condition, within: float = 30.0) -> dict:
    """/health once `condition` holds of it, polled; an AssertionError after `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        health = (await client.get("/health")).json()
        if condition(health):
            return health
        await asyncio.sleep(0.1)
    raise AssertionError(f"never so: {health}")


def test_a_live_stream_pauses_for_its_client_and_resumes_when_it_reads(checkpoint_dirs):
    env = {"STREAM_BUFFER_SECONDS": "1", "REQUEST_TIMEOUT": "0", "AUDIO_CACHE_MAX": "0"}

    async def scenario(base: str) -> tuple:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            async with client.stream("POST", "/v1/audio/speech", json=LIVE_BODY) as response:
                pieces = response.aiter_raw()
                received = len(await anext(pieces))
                # The client reads nothing: a row pauses.
                paused = await health_once(client, lambda health: health["paused_streams"] > 0)
                await asyncio.sleep(1.0)
                received += sum([len(piece) async for piece in pieces])  # it catches up: the row resumes
            finished = await health_once(client, lambda health: health["rows_held"] == 0)
        return received, paused, finished

    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=env) as live:
        received, paused, finished = asyncio.run(scenario(live.base))

        def speech_lines() -> list[dict]:
            lines = [json.loads(line) for line in live.log_path.read_text().splitlines() if '"route"' in line]
            return [line for line in lines if line.get("route") == "/v1/audio/speech"]

        # The request's log line is written once its response has ended, a moment after the client has it all.
        wait_for(speech_lines, within=10)
        speech = speech_lines()
    assert paused["rows_held"] == paused["active_streams"] + paused["paused_streams"], "paused rows are held"
    assert speech, "the stream's request was logged"
    first = speech[0]
    assert first["completed"] is True and received == first["frames"] * PCM_48K_FRAME_BYTES > 2_000_000
    assert finished["rows_held"] == 0


def test_a_live_stream_whose_client_stalls_is_dropped_after_the_request_timeout(checkpoint_dirs):
    """The limit is derived from this machine's speed (busy or not): the stalled request's generation until the
    sockets' buffers are full (a few MB) fits in it with room to spare; then the drop is waited for by its event."""
    checkpoint = checkpoint_dirs["custom_voice"]
    short = {**LIVE_BODY, "input": LONG_TEXT[:200], "stream": False}
    with live_process("serve", checkpoint, "--preload-model", env={"AUDIO_CACHE_MAX": "0"}) as live:
        probe = httpx.post(f"{live.base}/v1/audio/speech", json=short, timeout=600)
    ms_per_frame = float(probe.headers["X-Latency-Infer-Ms"]) / int(probe.headers["X-Audio-Frames"])
    limit = max(4.0, 1.5 * ms_per_frame * FRAMES_TO_FILL_SOCKETS / 1000)
    env = {"STREAM_BUFFER_SECONDS": "1", "REQUEST_TIMEOUT": f"{limit:.1f}", "AUDIO_CACHE_MAX": "0"}

    async def scenario(base: str) -> tuple:
        # A small receive buffer: the kernel takes less of what the client never reads.
        small_buffer = httpx.AsyncHTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)])
        async with (
            httpx.AsyncClient(base_url=base, timeout=60, transport=small_buffer) as client,
            client.stream("POST", "/v1/audio/speech", json=LIVE_BODY) as stalled,
        ):
            stalled_pieces = stalled.aiter_raw()  # kept: an iterator collected would close the response
            await anext(stalled_pieces)
            # The server takes audio until its socket's send buffer is full (MBs), then nothing more: every row pauses.
            await health_once(client, lambda health: health["paused_streams"] > 0 == health["active_streams"], limit)
            stalled_since = time.monotonic()
            # Nothing taken for REQUEST_TIMEOUT while paused: dropped, its row freed.
            dropped = await health_once(client, lambda health: health["rows_held"] == 0, limit + 30)
            return dropped, time.monotonic() - stalled_since

    with live_process("serve", checkpoint, "--preload-model", env=env) as live:
        dropped, waited = asyncio.run(scenario(live.base))
    assert (dropped["rows_held"], dropped["paused_streams"]) == (0, 0)
    assert waited >= limit / 2, "dropped for taking nothing for REQUEST_TIMEOUT, not much sooner"


def absorbed_by_kernel(send_buffer_bytes: int) -> int:
    """Bytes a connection accepted by `listening_socket` takes from the server before blocking, its client reading
    nothing."""
    listener = listening_socket(uvicorn.Config(app=None, host="127.0.0.1", port=0), send_buffer_bytes)
    listener.listen()
    with listener, socket.create_connection(listener.getsockname()) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        connection, _ = listener.accept()
        with connection:
            connection.setblocking(False)
            sent, deadline = 0, time.monotonic() + 5
            while time.monotonic() < deadline:  # loopback's buffers grow as they fill: until they are full
                try:
                    sent += connection.send(bytes(65536))
                except BlockingIOError:
                    time.sleep(0.05)
                    try:
                        sent += connection.send(bytes(65536))
                    except BlockingIOError:
                        return sent
    return sent


def test_connections_keep_a_small_send_buffer_so_a_stalled_client_holds_little_audio():
    """SEND_BUFFER_BYTES: every connection inherits the listening socket's send buffer, so a client that stops
    reading leaves some 300 KB (3 s of 48 kHz PCM) in the kernel, where the OS's own grows to MBs."""
    capped, unbounded = absorbed_by_kernel(131072), absorbed_by_kernel(0)
    assert capped < 400_000 < 2_000_000 < unbounded, (capped, unbounded)
