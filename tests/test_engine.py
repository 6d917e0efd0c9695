"""The engine: concurrent requests share steps yet get exactly their solo codes; streamed audio equals the
offline decode; cancel, queue-full, timeout and priorities behave; the event loop never stalls."""

from __future__ import annotations

import asyncio
import threading
import time
from functools import partial

import numpy as np
import pytest

from qwen3_tts_server.engine.jobs import SpeechJob
from qwen3_tts_server.engine.synthesis import Engine
from qwen3_tts_server.errors import EngineBusyError, InvalidInputError, RequestTimeoutError
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.prompt import SpeechInput

REQUESTS = [
    SpeechInput("Hello world, this is a test of the server.", "English", "Vivian"),
    SpeechInput("今天天气很好，我们去公园散步吧。", "Chinese", "Serena"),
    SpeechInput("巴适得很，走嘛。", "Auto", "Eric"),
    SpeechInput("Guten Morgen! Wie geht es dir heute?", "Auto", "Ryan"),
    SpeechInput("Bonjour à tous.", "French", "Sohee", whole_text=False),
]


def schedule_sizes(total: int, schedule=(1, 2, 4, 8)) -> list[int]:
    """Chunk sizes of a job that made `total` frames: the schedule, the last size repeated, the end cut."""
    sizes = []
    while sum(sizes) < total:
        sizes.append(min(schedule[min(len(sizes), len(schedule) - 1)], total - sum(sizes)))
    return sizes


def job_for(model, request: SpeechInput, params, **options) -> SpeechJob:
    """An engine job for `request`, prepared (checked and tokenized) as the service prepares it."""
    return SpeechJob(model.prompts.prepare(request), params, **options)


async def collect(stream) -> tuple[np.ndarray, np.ndarray, list]:
    chunks = [chunk async for chunk in stream]
    return np.concatenate([c.codes for c in chunks]), np.concatenate([c.audio for c in chunks]), chunks


def run_engine(model, scenario, static_step: bool = False, **options):
    """Run `scenario(engine)`; `static_step` seats a generator that takes the static step (the GPU's) on CPU."""
    engine = Engine(model, **options)
    if static_step:
        engine.generator = FrameGenerator(model.talker, engine.max_batch_size, static=True)
    engine.start()
    try:
        return asyncio.run(scenario(engine))
    finally:
        engine.stop()


@pytest.mark.parametrize("static_step", [False, True], ids=["eager", "static"])
@pytest.mark.parametrize("sampled", [False, True])
def test_staggered_concurrent_requests_get_their_solo_codes(models, sampled, static_step):
    model = models["custom_voice"]
    params = [model.sampling(seed=10 + i) if sampled else model.sampling().greedy() for i in range(len(REQUESTS))]
    solo = [model.generate([r], p, max_frames=30)[0].codes for r, p in zip(REQUESTS, params, strict=True)]

    async def scenario(engine):
        tasks = []
        for request, p in zip(REQUESTS, params, strict=True):
            stream = engine.submit(job_for(model, request, p, max_frames=30))
            tasks.append(asyncio.create_task(collect(stream)))
            await asyncio.sleep(0.05)  # join a running batch at different frames
        return await asyncio.gather(*tasks)

    results = run_engine(model, scenario, static_step, max_batch_size=4)
    for (codes, audio, chunks), expected in zip(results, solo, strict=True):
        np.testing.assert_array_equal(codes, expected)
        assert len(audio) == len(codes) * 1920
        assert chunks[-1].finish_reason in ("eos", "length") and all(c.finish_reason is None for c in chunks[:-1])
        assert [c.frames for c in chunks] == schedule_sizes(len(codes))


@pytest.mark.parametrize("scheduler", ["deadline", "fixed"])
def test_a_burst_is_admitted_together_and_each_request_gets_its_solo_codes(models, scheduler, monkeypatch):
    """The deadline scheduler prefills a burst in one forward; the fixed one, `max_prefills_per_step` prefills one
    after another. Either way each seeded request makes the codes it makes alone."""
    model = models["custom_voice"]
    params = [model.sampling(seed=40 + i) for i in range(4)]
    solo = [model.generate([r], p, max_frames=12)[0].codes for r, p in zip(REQUESTS[:4], params, strict=True)]
    prefills: list[list[int]] = []
    packed = model.talker.model.prefill_packed

    def counted(x, lengths, cache, rows):
        prefills.append(rows)
        return packed(x, lengths, cache, rows)

    monkeypatch.setattr(model.talker.model, "prefill_packed", counted)

    async def scenario(engine):
        jobs = [job_for(model, r, p, max_frames=12) for r, p in zip(REQUESTS[:4], params, strict=True)]
        streams = [engine.submit(job) for job in jobs]
        engine.start()
        return await asyncio.gather(*(collect(stream) for stream in streams))

    limit = 2 if scheduler == "fixed" else 32
    engine = Engine(model, max_batch_size=4, max_prefills_per_step=limit, scheduler=scheduler)
    try:
        results = asyncio.run(scenario(engine))
    finally:
        engine.stop()
    assert prefills == ([[0, 1, 2, 3]] if scheduler == "deadline" else [[0], [1], [2], [3]])
    for (codes, _, _), expected in zip(results, solo, strict=True):
        np.testing.assert_array_equal(codes, expected)


def test_rows_ahead_of_their_listeners_skip_steps_while_a_new_request_waits_for_audio(models, monkeypatch):
    """A stream whose listener holds seconds of audio yields its steps to a new arrival until the new one has audio;
    both make the codes they make alone."""
    model = models["custom_voice"]
    long_params, new_params = model.sampling(seed=50), model.sampling(seed=51)
    long_solo = model.generate([REQUESTS[0]], long_params, max_frames=120, suppress_eos=True)[0].codes
    new_solo = model.generate([REQUESTS[1]], new_params, max_frames=10)[0].codes
    held: list[int] = []

    async def scenario(engine):
        pause = engine.generator.pause
        monkeypatch.setattr(engine.generator, "pause", lambda row: held.append(row) or pause(row))
        long = engine.submit(job_for(model, REQUESTS[0], long_params, max_frames=120, suppress_eos=True))
        chunks = [await long.__anext__()]
        while sum(c.frames for c in chunks) * 0.08 - (chunks[-1].elapsed_seconds - chunks[0].elapsed_seconds) < 2.5:
            chunks.append(await long.__anext__())  # its listener holds 2.5 s (120 frames: there from 1.3x real time)
        late = asyncio.create_task(collect(engine.submit(job_for(model, REQUESTS[1], new_params, max_frames=10))))
        rest = await collect(long)
        return np.concatenate([c.codes for c in chunks] + [rest[0]]), await late

    engine = Engine(model, max_batch_size=2, stream_buffer_seconds=0).start(preload=True)
    try:
        long_codes, (new_codes, _, _) = asyncio.run(scenario(engine))
    finally:
        engine.stop()
    assert held and set(held) == {0}, "the long stream's row skipped steps"
    np.testing.assert_array_equal(long_codes, long_solo)
    np.testing.assert_array_equal(new_codes, new_solo)


def test_chunks_of_different_lengths_decode_in_one_pass_as_on_a_gpu(models, monkeypatch):
    """On a GPU the deadline scheduler decodes every chunk due in a step in one pass, whatever their lengths: streams
    whose chunks of different lengths fall due together get their solo codes and the offline decode of them."""
    model = models["custom_voice"]
    monkeypatch.setattr(Engine, "_decode_groups", lambda self, ready: [ready] if ready else [])
    params = [model.sampling(seed=60 + i) for i in range(3)]
    solo = [model.generate([r], p, max_frames=20)[0].codes for r, p in zip(REQUESTS[:3], params, strict=True)]
    decodes: list[list[int]] = []
    ragged = model.codec_stream.decode_ragged

    def counted(states, chunks):
        decodes.append([len(chunk) for chunk in chunks])
        return ragged(states, chunks)

    monkeypatch.setattr(model.codec_stream, "decode_ragged", counted)

    schedules = [(1, 2, 4, 8), (3,), (2, 5)]  # due together: after step 3 (2 and 3 frames), 6 (3), 7 (4 and 5), ...

    async def scenario(engine):
        jobs = [
            job_for(model, request, p, max_frames=20, chunk_schedule=schedule)
            for request, p, schedule in zip(REQUESTS[:3], params, schedules, strict=True)
        ]
        streams = [engine.submit(job) for job in jobs]  # admitted together, before the engine starts
        engine.start()
        return await asyncio.gather(*(collect(stream) for stream in streams))

    engine = Engine(model, max_batch_size=3)
    try:
        results = asyncio.run(scenario(engine))
    finally:
        engine.stop()
    assert any(len(set(lengths)) > 1 for lengths in decodes), "chunks of different lengths decoded together"
    for (codes, audio, _), expected in zip(results, solo, strict=True):
        np.testing.assert_array_equal(codes, expected)
        assert np.abs(audio - model.decode(codes)).max() <= 1e-5


def test_streamed_audio_equals_the_offline_decode(models):
    model = models["custom_voice"]

    async def scenario(engine):
        job = job_for(model, REQUESTS[1], model.sampling(seed=3), max_frames=80, chunk_schedule=(1, 2, 4, 8))
        return await collect(engine.submit(job))

    codes, audio, chunks = run_engine(model, scenario)
    assert [c.first_frame for c in chunks] == list(np.cumsum([0] + [c.frames for c in chunks[:-1]]))
    assert np.abs(audio - model.decode(codes)).max() <= 1e-5


def test_cancelling_frees_the_row_within_a_step(models):
    model = models["custom_voice"]

    async def scenario(engine):
        long = engine.submit(job_for(model, REQUESTS[0], model.sampling(seed=1), max_frames=500, suppress_eos=True))
        first = await long.__anext__()
        await long.aclose()
        short = job_for(model, REQUESTS[2], model.sampling().greedy(), max_frames=5)
        codes, _, _ = await asyncio.wait_for(collect(engine.submit(short)), timeout=60)
        return first, codes, engine

    first, codes, engine = run_engine(model, scenario, max_batch_size=1)
    assert first.frames == 1 and len(codes) <= 5
    assert engine.active == 0 and engine.generator.active == []


def test_full_queue_is_refused_at_once(models):
    model = models["custom_voice"]
    engine = Engine(model, max_batch_size=1, max_queue_depth=1)  # not started: nothing leaves the queue

    async def scenario():
        engine.submit(job_for(model, REQUESTS[0], model.sampling()))
        with pytest.raises(EngineBusyError, match="busy"):
            engine.submit(job_for(model, REQUESTS[1], model.sampling()))
        engine.submit(job_for(model, REQUESTS[1], model.sampling(), continuation=True))
        return [handle.job.continuation for handle in engine._interactive], engine.waiting

    # A request's next segment is never refused and goes to the front of the queue.
    assert asyncio.run(scenario()) == ([True, False], 2)


def test_zero_queue_depth_means_no_limit(models):
    model = models["custom_voice"]
    engine = Engine(model, max_batch_size=1, max_queue_depth=0)  # not started: nothing leaves the queue

    async def scenario():
        for _ in range(100):
            engine.submit(job_for(model, REQUESTS[0], model.sampling()))
        return engine.waiting

    assert asyncio.run(scenario()) == 100


def test_retry_after_is_the_queue_drain_time_at_the_measured_pace(models):
    model = models["custom_voice"]

    def retry_after(depth: int, step_seconds: float | None = None, frames_per_request: int = 0) -> int:
        engine = Engine(model, max_batch_size=2, max_queue_depth=depth)  # not started: the queue stays full
        if step_seconds is not None:
            engine.pace.observe_step(step_seconds)
            engine.pace.observe_request(frames_per_request)

        async def scenario():
            for _ in range(depth):
                engine.submit(job_for(model, REQUESTS[0], model.sampling()))
            with pytest.raises(EngineBusyError) as refused:
                engine.submit(job_for(model, REQUESTS[1], model.sampling()))
            return refused.value.retry_after

        return asyncio.run(scenario())

    # waiting / rows * frames per request * seconds per step, rounded up
    assert retry_after(2, 0.05, 100) == 5 and retry_after(8, 0.05, 100) == 20
    assert retry_after(8) == 1, "nothing measured yet: the minimum"
    assert retry_after(8, 0.5, 2000) == 60, "capped"


def test_timeout_ends_the_job_with_a_typed_error(models):
    model = models["custom_voice"]

    async def scenario(engine):
        job = job_for(model, REQUESTS[0], model.sampling(seed=2), max_frames=2000, suppress_eos=True, timeout=0.3)
        with pytest.raises(RequestTimeoutError, match="0.3 s limit"):
            await collect(engine.submit(job))
        return engine.active

    assert run_engine(model, scenario) == 0


def test_interactive_jobs_are_admitted_before_whole_file_jobs(models):
    model = models["custom_voice"]
    engine = Engine(model, max_batch_size=1, max_prefills_per_step=1)

    async def scenario():
        whole_file = engine.submit(
            job_for(model, REQUESTS[0], model.sampling().greedy(), max_frames=3, interactive=False)
        )
        interactive = engine.submit(job_for(model, REQUESTS[1], model.sampling().greedy(), max_frames=3))
        engine.start()
        order = []

        async def watch(name, stream):
            await collect(stream)
            order.append(name)

        await asyncio.gather(watch("batch", whole_file), watch("interactive", interactive))
        return order

    try:
        assert asyncio.run(scenario()) == ["interactive", "batch"]
    finally:
        engine.stop()


def test_bad_request_fails_its_stream_only(models):
    model = models["custom_voice"]

    async def scenario(engine):
        bad = engine.submit(job_for(model, REQUESTS[0], model.sampling(), max_frames=0))
        good = engine.submit(job_for(model, REQUESTS[2], model.sampling().greedy(), max_frames=4))
        with pytest.raises(InvalidInputError, match="max_frames must be >= 1"):
            await collect(bad)
        codes, _, _ = await collect(good)
        return codes

    assert len(run_engine(model, scenario)) >= 2


def test_event_loop_keeps_ticking_during_generation(models):
    model = models["custom_voice"]

    async def scenario(engine):
        gaps, done = [], asyncio.Event()

        async def ticker():
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        jobs = [job_for(model, r, model.sampling(seed=5), max_frames=40, suppress_eos=True) for r in REQUESTS[:3]]
        await asyncio.gather(*(collect(engine.submit(job)) for job in jobs))
        done.set()
        await tick
        return gaps

    gaps = run_engine(model, scenario)
    assert len(gaps) > 20 and max(gaps) < 0.5


def test_two_cold_requests_load_once_and_idle_unload_reloads(checkpoint_dirs, models):
    from qwen3_tts_server.engine.model_manager import ModelManager, ModelState
    from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

    manager = ModelManager(lambda: Qwen3TTSModel.load(checkpoint_dirs["custom_voice"]), idle_timeout=0.5)
    engine = Engine(manager).start()
    model = models["custom_voice"]  # the same checkpoint: it prepares the jobs

    async def scenario():
        assert manager.state is ModelState.UNLOADED
        first = [collect(engine.submit(job_for(model, r, _greedy_defaults(), max_frames=3))) for r in REQUESTS[:2]]
        await asyncio.gather(*first)
        assert manager.loads == 1 and manager.state is ModelState.READY
        for _ in range(100):
            if manager.state is ModelState.UNLOADED:
                break
            await asyncio.sleep(0.05)
        assert manager.state is ModelState.UNLOADED and engine.generator is None
        codes, _, _ = await collect(engine.submit(job_for(model, REQUESTS[2], _greedy_defaults(), max_frames=3)))
        assert manager.loads == 2 and len(codes) >= 2

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()


def test_an_idle_engine_thread_ends_and_its_model_still_unloads_on_time(checkpoint_dirs, models, monkeypatch):
    """An engine thread with no work ends after IDLE_THREAD_LINGER (its OpenMP pool with it) and gives the freed
    memory back to the system as it goes, the model stays loaded, the next job starts another thread and gets the
    same codes, and the idle unload comes on time."""
    import qwen3_tts_server.engine.rows as rows_module
    from qwen3_tts_server.engine.model_manager import ModelManager, ModelState
    from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

    monkeypatch.setattr(rows_module, "IDLE_THREAD_LINGER", 0.2)
    trims: list[str] = []  # the threads that gave memory back
    monkeypatch.setattr(rows_module, "release_free_memory", lambda: trims.append(threading.current_thread().name))
    manager = ModelManager(lambda: Qwen3TTSModel.load(checkpoint_dirs["custom_voice"]), idle_timeout=1.5)
    engine = Engine(manager).start()
    model = models["custom_voice"]

    async def until(condition, seconds: float) -> float:
        started = time.monotonic()
        while not condition() and time.monotonic() - started < seconds:
            await asyncio.sleep(0.02)
        assert condition()
        return time.monotonic() - started

    async def scenario():
        job = partial(job_for, model, REQUESTS[0], _greedy_defaults(), max_frames=3)
        first, _, _ = await collect(engine.submit(job()))
        await until(lambda: not engine.thread_alive, 1.0)
        await until(lambda: trims == [engine.thread_name], 1.0)
        assert manager.state is ModelState.READY and engine.generator is not None
        again, _, _ = await collect(engine.submit(job()))  # a new thread, the same model and generator
        assert np.array_equal(again, first) and manager.loads == 1
        await until(lambda: not engine.thread_alive, 1.0)
        await until(lambda: len(trims) == 2, 1.0)
        waited = await until(lambda: manager.state is ModelState.UNLOADED, 5.0)
        assert waited > 0.5 and engine.generator is None  # the timer's unload, at the idle timeout
        assert np.array_equal((await collect(engine.submit(job())))[0], first) and manager.loads == 2
        await until(lambda: not engine.thread_alive, 1.0)
        assert engine.release(5.0) and manager.state is ModelState.UNLOADED  # a budget's unload, no thread running

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()


def test_an_idle_timeout_shorter_than_the_linger_unloads_on_time(checkpoint_dirs, models, monkeypatch):
    import qwen3_tts_server.engine.rows as rows_module
    from qwen3_tts_server.engine.model_manager import ModelManager, ModelState
    from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

    monkeypatch.setattr(rows_module, "IDLE_THREAD_LINGER", 30.0)
    manager = ModelManager(lambda: Qwen3TTSModel.load(checkpoint_dirs["custom_voice"]), idle_timeout=0.3)
    engine = Engine(manager).start()

    async def scenario():
        await collect(engine.submit(job_for(models["custom_voice"], REQUESTS[0], _greedy_defaults(), max_frames=2)))
        finished = time.monotonic()
        while manager.state is not ModelState.UNLOADED and time.monotonic() - finished < 10:
            await asyncio.sleep(0.02)
        assert manager.state is ModelState.UNLOADED and time.monotonic() - finished < 5  # not after the linger

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()


def _greedy_defaults():
    from qwen3_tts_server.model.tts.sampling import SamplingParams

    return SamplingParams(
        do_sample=False,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        repetition_penalty=1.05,
        subtalker_do_sample=False,
        subtalker_temperature=1.0,
        subtalker_top_k=0,
        subtalker_top_p=1.0,
    )


def test_a_checkpoint_that_cannot_load_fails_the_waiting_requests(tmp_path, models):
    from qwen3_tts_server.engine.model_manager import ModelManager, ModelState
    from qwen3_tts_server.errors import CheckpointError
    from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

    manager = ModelManager(lambda: Qwen3TTSModel.load(tmp_path / "missing"))
    engine = Engine(manager).start()

    async def scenario():
        with pytest.raises(CheckpointError, match="does not exist"):
            model = models["custom_voice"]
            await collect(engine.submit(job_for(model, REQUESTS[0], model.sampling())))

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()
    assert manager.state is ModelState.UNLOADED


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design", "base"])
def test_warm_up_speaks_two_frames_with_every_model_type(models, kind):
    from qwen3_tts_server.engine.model_manager import warm_up_model

    model = models[kind]
    audio = warm_up_model(model)
    assert audio.shape == (2 * model.samples_per_frame,)
    assert np.isfinite(audio).all() and np.abs(audio).max() > 1e-4


def test_the_hard_frame_cap_ends_a_job_as_cut(models):
    model = models["custom_voice"]

    async def scenario(engine):
        job = job_for(model, REQUESTS[0], model.sampling(seed=4), max_frames=50, suppress_eos=True)
        return await collect(engine.submit(job))

    codes, audio, chunks = run_engine(model, scenario, max_frames_cap=6)
    assert len(codes) == 6 and chunks[-1].finish_reason == "length"
    assert audio.dtype == np.float32 and len(audio) == 6 * 1920
    assert np.abs(audio - model.decode(codes)).max() <= 1e-5


def test_preload_loads_before_the_first_request(checkpoint_dirs):
    from qwen3_tts_server.engine.model_manager import ModelManager, ModelState
    from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

    manager = ModelManager(lambda: Qwen3TTSModel.load(checkpoint_dirs["voice_design"]))
    engine = Engine(manager).start(preload=True)
    try:
        assert manager.state is ModelState.READY and manager.loads == 1
    finally:
        engine.stop()


def test_zero_frame_budget_is_refused_on_its_stream(models):
    model = models["custom_voice"]

    async def scenario(engine):
        with pytest.raises(InvalidInputError, match="max_frames must be >= 1"):
            await collect(engine.submit(job_for(model, REQUESTS[0], model.sampling(), max_frames=0)))

    run_engine(model, scenario)


def test_in_context_voice_streams_what_the_offline_decode_with_its_reference_gives(models, tmp_path):
    from parity_cases import REF_TEXT, write_reference
    from qwen3_tts_server.audio.reference import load_reference

    model = models["base"]
    reference = load_reference(write_reference(tmp_path, "ref_16k_mono.wav").read_bytes())
    voice = model.voice_encoder.encode(reference, REF_TEXT["ref_16k_mono.wav"])
    job = job_for(model, SpeechInput("A cloned voice, streamed.", "English", voice=voice), model.sampling().greedy())

    async def scenario(engine):
        first = await collect(engine.submit(job))
        again = await collect(engine.submit(job))  # the primed decoder state comes from the cache
        return first, again

    (codes, audio, _), (_, audio_again, _) = run_engine(model, scenario, max_batch_size=2)
    offline = model.decode(codes, context=voice.ref_codes)
    assert len(audio) == len(offline) == len(codes) * 1920
    assert np.abs(audio - offline).max() < 1e-4 and np.array_equal(audio, audio_again)
    assert np.abs(audio - model.decode(codes)).max() > 1e-3, "without its reference the start decodes differently"
