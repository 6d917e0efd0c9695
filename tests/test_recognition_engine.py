"""The recognition engine (engine/recognition.py) on the tiny random-weight transcriber: parts decoded side by side
get the tokens the transcriber gives each alone, whatever joins or leaves beside them; the queue's priorities,
limit, timeouts and cancellation; a fault fails only the parts it touched."""

from __future__ import annotations

import asyncio
import dataclasses
import functools

import numpy as np
import pytest

from asr_cases import ASR_CHECKPOINTS
from live_cases import pass_by_pass
from qwen3_tts_server.engine.jobs import RequestClock
from qwen3_tts_server.engine.recognition import TRANSCRIPTION_FAILED, RecognitionEngine, TranscriptionJob
from qwen3_tts_server.errors import (
    EngineBusyError,
    InvalidInputError,
    RequestTimeoutError,
    TranscriptionFailedError,
)
from qwen3_tts_server.model.asr.decoding import GreedyRows
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.streaming import IncrementalPasses, LiveUtterance, StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model
from qwen3_tts_server.testing.signals import voiced_glide

# (seconds, pitch, language, budget): parts of different lengths, forced or identified, budgets that end some rows
# early, so rows leave and join at different steps.
PARTS = [
    (1.2, 120.0, None, 24),
    (0.6, 180.0, "English", 9),
    (2.5, 150.0, "Chinese", 17),
    (0.9, 210.0, None, 5),
    (1.7, 100.0, "Japanese", 24),
]


@pytest.fixture(scope="module")
def transcriber(tmp_path_factory) -> Transcriber:
    directory = make_asr_test_model(tmp_path_factory.mktemp("asr") / "asr", **ASR_CHECKPOINTS["asr"])
    return Transcriber(load_asr_checkpoint(directory))


def job(seconds: float, pitch: float, language: str | None, budget: int, **options) -> TranscriptionJob:
    return TranscriptionJob(voiced_glide(seconds, pitch=pitch), language, max_new_tokens=budget, **options)


def alone(transcriber: Transcriber, part: TranscriptionJob) -> list[int]:
    (result,) = transcriber.transcribe([part.wave], [part.language], max_new_tokens=part.budget, rows=1)
    return result.part_tokens[0]


async def admitted(order: list[str], name: str, stream) -> None:
    """Follow a part's stream, noting `name` in `order` when its first token arrives."""
    async for token in stream:
        if token.index == 0:
            order.append(name)


async def collect(stream) -> list:
    return [token async for token in stream]


def test_parts_side_by_side_get_the_tokens_each_gets_alone(transcriber):
    parts = [job(*spec) for spec in PARTS]
    engine = RecognitionEngine(transcriber, max_batch_size=3).start()  # five parts through three rows

    async def scenario():
        return await asyncio.gather(*(collect(engine.submit(part)) for part in parts))

    try:
        results = asyncio.run(scenario())
    finally:
        engine.stop()
    for part, tokens in zip(parts, results, strict=True):
        assert [token.token for token in tokens] == alone(transcriber, part)
        assert [token.index for token in tokens] == list(range(len(tokens)))
        assert [token.finish_reason for token in tokens[:-1]] == [None] * (len(tokens) - 1)
        stopped = tokens[-1].token in transcriber.model.tokens.stop
        assert tokens[-1].finish_reason == ("stop" if stopped else "length")
        assert stopped or len(tokens) == part.budget
        assert 0 <= tokens[0].queue_seconds <= tokens[0].elapsed_seconds <= tokens[-1].elapsed_seconds
    assert engine.idle and engine.rows.free_slots == 3


def test_live_passes_decode_in_the_engine_beside_uploads_as_they_do_alone(transcriber):
    """A live utterance's passes (their prompts after the stored beginning, made on admission) share the engine's
    rows with uploads: each pass's text is the one the utterance gives when it runs its passes alone, and the
    uploads' tokens are theirs alone."""
    wave = voiced_glide(11.0, pitch=140.0)
    settings = StreamingSettings(max_new_tokens=6)
    expected = pass_by_pass(transcriber, wave, settings, field="output")
    live = LiveUtterance(transcriber, IncrementalPasses(transcriber), settings)
    uploads = [job(*spec) for spec in PARTS[:3]]
    engine = RecognitionEngine(transcriber, max_batch_size=3).start()

    def submitted(step) -> TranscriptionJob:
        prepare = functools.partial(live.passes.prepare, step.heard, step.prefix)
        return TranscriptionJob(step.heard, max_new_tokens=step.budget, interactive=True, prompt=lambda _: prepare())

    async def session() -> list[str]:
        outputs = []
        for start in [*range(0, len(wave), 32000), None]:
            if start is not None:
                live.take(wave[start : start + 32000])
            while (step := live.next_pass(final=start is None)) is not None:
                live.passed(step, [token.token for token in await collect(engine.submit(submitted(step)))])
                outputs.append(live.output)
        return outputs

    async def scenario():
        return await asyncio.gather(session(), *(collect(engine.submit(part)) for part in uploads))

    try:
        outputs, *results = asyncio.run(scenario())
    finally:
        engine.stop()
    assert outputs == expected and len(outputs) == 6
    for part, tokens in zip(uploads, results, strict=True):
        assert [token.token for token in tokens] == alone(transcriber, part)


def test_a_stop_token_ends_a_part_before_its_budget(transcriber):
    """The random model never ends its text by itself: here its sixth token is taken for the stop token."""
    part = job(1.2, 120.0, None, 24)
    sixth = alone(transcriber, part)[5]
    tokens = dataclasses.replace(transcriber.model.tokens, stop=frozenset({sixth}))
    stopping = Transcriber(dataclasses.replace(transcriber.model, tokens=tokens))
    expected = alone(stopping, part)
    engine = RecognitionEngine(stopping, max_batch_size=2).start()

    async def scenario():
        return await collect(engine.submit(part))

    try:
        decoded = asyncio.run(scenario())
    finally:
        engine.stop()
    assert [token.token for token in decoded] == expected and len(expected) <= 6 and expected[-1] == sixth
    assert decoded[-1].finish_reason == "stop"


def test_interactive_parts_are_admitted_before_uploads(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=1)
    order: list[str] = []

    async def scenario():
        tasks = [
            asyncio.create_task(admitted(order, "upload", engine.submit(job(0.5, 130.0, None, 3)))),
            asyncio.create_task(admitted(order, "live", engine.submit(job(0.5, 170.0, None, 3, interactive=True)))),
        ]
        engine.start()  # both wait before the thread takes either
        await asyncio.gather(*tasks)

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()
    assert order == ["live", "upload"]


def test_a_requests_parts_are_queued_together_in_order(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=1, max_queue_depth=2)
    order: list[str] = []

    async def scenario():
        first, second, third = engine.submit_in_order(
            [job(0.5, 130.0, None, 2), job(0.5, 150.0, None, 2), job(0.5, 170.0, None, 2)], RequestClock(None)
        )  # into a queue of two: a request is taken whole
        with pytest.raises(EngineBusyError):
            engine.submit_in_order([job(0.5, 130.0, None, 2)], RequestClock(None))
        engine.max_queue_depth = 0
        other = engine.submit(job(0.5, 190.0, None, 2))
        engine.start()
        streams = {"first": first, "second": second, "third": third, "other": other}
        await asyncio.gather(*(admitted(order, name, stream) for name, stream in streams.items()))

    try:
        asyncio.run(scenario())
    finally:
        engine.stop()
    assert order == ["first", "second", "third", "other"]


def test_a_full_queue_refuses_with_a_retry_time(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=1, max_queue_depth=2)  # not started: nothing leaves

    async def scenario():
        engine.submit(job(0.5, 130.0, None, 3))
        engine.submit(job(0.5, 130.0, None, 3))
        with pytest.raises(EngineBusyError) as refused:
            engine.submit(job(0.5, 130.0, None, 3))
        engine.submit(job(0.5, 130.0, None, 3, continuation=True))  # a part of a request under way gets in
        return refused.value, engine.waiting

    refused, waiting = asyncio.run(scenario())
    assert refused.status == 503 and 1 <= refused.retry_after <= 60 and waiting == 3


def test_audio_too_short_to_encode_is_refused_at_submission(transcriber):
    engine = RecognitionEngine(transcriber)

    async def scenario():
        engine.submit(TranscriptionJob(np.zeros(100, dtype=np.float32)))

    with pytest.raises(InvalidInputError, match="at least 12.6 ms"):
        asyncio.run(scenario())
    assert engine.waiting == 0


def test_a_closed_stream_frees_its_row_and_the_others_go_on(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=2).start()
    kept = job(1.0, 140.0, None, 20)

    async def scenario():
        left = engine.submit(job(1.0, 190.0, None, 10_000))
        async for token in left:
            if token.index == 2:
                break
        await left.aclose()
        tokens = await collect(engine.submit(kept))
        for _ in range(200):  # the engine frees the closed row within a step
            if engine.active == 0:
                break
            await asyncio.sleep(0.01)
        return tokens, engine.active

    try:
        tokens, active = asyncio.run(scenario())
    finally:
        engine.stop()
    assert [token.token for token in tokens] == alone(transcriber, kept) and active == 0


def test_a_part_past_its_time_limit_ends_with_a_typed_error(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=1).start()

    async def scenario():
        with pytest.raises(RequestTimeoutError, match="0.05 s limit") as ended:
            await collect(engine.submit(job(1.0, 140.0, None, 10_000, timeout=0.05)))
        return ended.value

    try:
        error = asyncio.run(scenario())
    finally:
        engine.stop()
    assert error.status == 504 and engine.active == 0
    assert (error.code, error.flat_code) == ("timeout", "TRANSCRIPTION_TIMEOUT")  # not the speech engine's


def test_a_failed_prefill_fails_its_part_alone(transcriber, monkeypatch, caplog):
    broken = job(0.8, 111.0, None, 6)
    healthy = job(0.8, 150.0, None, 6)
    embedded = transcriber.embedded_prompt

    def prompt(wave, context="", language=None):
        if wave is broken.wave:
            raise RuntimeError("secret detail")
        return embedded(wave, context, language)

    monkeypatch.setattr(transcriber, "embedded_prompt", prompt)
    engine = RecognitionEngine(transcriber, max_batch_size=2).start()

    async def scenario():
        outcomes = await asyncio.gather(
            collect(engine.submit(broken)), collect(engine.submit(healthy)), return_exceptions=True
        )
        return outcomes

    try:
        failed, tokens = asyncio.run(scenario())
    finally:
        engine.stop()
    assert isinstance(failed, TranscriptionFailedError) and str(failed) == TRANSCRIPTION_FAILED
    assert failed.flat_code == "TRANSCRIPTION_FAILED" and "secret detail" not in str(failed)
    assert "a prefill failed" in caplog.text and "secret detail" in caplog.text
    monkeypatch.undo()
    assert [token.token for token in tokens] == alone(transcriber, healthy)
    assert engine.failure is None and engine.rows.free_slots == 2


def test_uploads_whose_prefill_together_fails_are_prefilled_one_by_one(transcriber, monkeypatch):
    parts = [job(*spec) for spec in PARTS[:3]]
    calls: list[int] = []

    def faulty(self, prompts, budgets, packed=None):  # a forward of several prompts fails (out of memory, say)
        calls.append(len(prompts))
        raise RuntimeError("out of memory")

    monkeypatch.setattr(GreedyRows, "join_many", faulty)
    engine = RecognitionEngine(transcriber, max_batch_size=3, max_prefills_per_step=3).start()

    async def scenario():
        with engine._cv:  # the engine thread sees the three at once
            streams = [engine.submit(part) for part in parts]
        return await asyncio.gather(*(collect(stream) for stream in streams))

    try:
        results = asyncio.run(scenario())
    finally:
        engine.stop()
    assert calls == [3], "together once, then each alone"
    monkeypatch.undo()
    for part, tokens in zip(parts, results, strict=True):
        assert [token.token for token in tokens] == alone(transcriber, part)
    assert engine.failure is None and engine.rows.free_slots == 3
