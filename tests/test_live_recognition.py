"""Live sessions (service/recognition/live.py) on the tiny transcriber through the recognition engine: a partial
after every 2 s pass and a final after the tail, the same texts the model-layer utterance gives alone; utterances
cut by voice activity on speech spoken by espeak-ng, at 24 kHz; a session closed mid-utterance gets its final; the
audio waiting for passes is bounded; a transcriber's live session slots are taken and given back however a
session ends; voice activity and commits never wait for passes; a failed transcribing task ends the session."""

from __future__ import annotations

import asyncio
import functools

import numpy as np
import pytest
import soxr

from live_cases import CLEAR, listened, pass_by_pass, session_events, transcribed
from qwen3_tts_server.audio.voice_activity import VoiceActivitySettings
from qwen3_tts_server.engine.recognition import RecognitionEngine
from qwen3_tts_server.errors import (
    LiveSessionLimitError,
    ModelUnavailableError,
    PendingAudioLimitError,
    TranscriptionFailedError,
)
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.streaming import PromptHead, StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.service.recognition.live import Committed, LiveSession, LiveTranscript, SpeechBoundary
from qwen3_tts_server.service.recognition.live_slots import LiveSessionSlots
from qwen3_tts_server.testing.signals import voiced_glide
from test_voice_activity import conversation  # noqa: F401 (a fixture)

STREAMING = StreamingSettings(max_new_tokens=6)


@pytest.fixture(scope="module")
def transcriber(both_families) -> Transcriber:
    return Transcriber(load_asr_checkpoint(both_families["asr"]))


def alone(transcriber: Transcriber, wave: np.ndarray) -> list[str]:
    return pass_by_pass(transcriber, wave, STREAMING)


run_session = functools.partial(session_events, streaming=STREAMING)


def test_a_partial_after_every_pass_and_a_final_after_the_tail(transcriber):
    wave = voiced_glide(7.0, pitch=130.0)
    events = run_session(transcriber, [wave[i : i + 4000] for i in range(0, len(wave), 4000)])
    # committed as soon as the commit is heard, whatever passes are still to run; the final after it, last
    (committed,) = [event for event in events if not isinstance(event, LiveTranscript)]
    events.remove(committed)
    assert committed == Committed(0, 7.0, by_commit=True)
    assert [(event.utterance, event.final) for event in events] == [(0, False)] * 3 + [(0, True)]
    assert [event.text for event in events] == alone(transcriber, wave)
    # each tells where the audio it heard ends: a 2 s chunk more each pass, the whole utterance at the final
    assert [event.heard_until for event in events] == [2.0, 4.0, 6.0, 7.0]


def test_a_session_closed_mid_utterance_gets_its_final(transcriber):
    wave = voiced_glide(3.1, pitch=170.0)
    events = run_session(transcriber, [wave], commit=False)
    # committed when the close is heard, before the pass of its first 2 s has given its partial
    assert [getattr(event, "final", "committed") for event in events] == ["committed", False, True]
    assert events[-1].text == alone(transcriber, wave)[-1]


def test_voice_activity_cuts_utterances_at_24_khz(transcriber, conversation, monkeypatch):  # noqa: F811
    heads = []  # the prompt heads computed: one for the session's utterances of one context
    compute = PromptHead.compute.__func__

    def counted(cls, *args):
        heads.append(compute(cls, *args))
        return heads[-1]

    monkeypatch.setattr(PromptHead, "compute", classmethod(counted))
    wave, spans = conversation
    at_24k = soxr.resample(wave, 16000, 24000).astype(np.float32)
    feeds = [at_24k[i : i + 2400] for i in range(0, len(at_24k), 2400)]  # 100 ms pieces
    events = run_session(transcriber, feeds, rate=24000, voice_activity=VoiceActivitySettings(), commit=False)
    boundaries = [(event.utterance, event.kind) for event in events if isinstance(event, SpeechBoundary)]
    assert boundaries == [(0, "started"), (0, "stopped"), (1, "started"), (1, "stopped")]
    finals = [event for event in events if isinstance(event, LiveTranscript) and event.final]
    assert [event.utterance for event in finals] == [0, 1] and all(event.text for event in finals)
    assert len(heads) == 1
    started = [event.seconds for event in events if isinstance(event, SpeechBoundary) and event.kind == "started"]
    assert all(start - 0.5 <= began <= start for began, (start, _) in zip(started, spans, strict=True))
    # passes over speech only: the first utterance (about 3.3 s) has one whole chunk, the second (1.5 s) none
    partials = [event.utterance for event in events if isinstance(event, LiveTranscript) and not event.final]
    assert partials == [0]
    stopped = next(event for event in events if getattr(event, "kind", "") == "stopped")
    committed = next(event for event in events if isinstance(event, Committed))
    assert listened(events)[1:3] == [stopped, Committed(0, pytest.approx(3.4, abs=0.2))]
    assert events.index(stopped) < events.index(committed) < events.index(finals[0])
    # dated in the session's audio from where the utterance was cut, the second after the first's end
    (partial,) = [event for event in events if isinstance(event, LiveTranscript) and not event.final]
    assert partial.heard_until == pytest.approx(started[0] + 2.0, abs=0.05)
    assert finals[0].heard_until == pytest.approx(started[0] + committed.seconds, abs=0.05)
    assert finals[1].heard_until > finals[0].heard_until + 1.0
    # each begins where its speech was heard to start
    assert [partial.start, *(event.start for event in finals)] == pytest.approx([started[0], *started], abs=0.05)


def test_a_commit_without_an_utterance_gives_a_final_of_no_text(transcriber):
    events = run_session(transcriber, [], commit=True)
    assert events == [Committed(0, 0.0, by_commit=True), LiveTranscript(0, "", "", final=True)]


def test_audio_waiting_past_its_bound_is_refused_and_the_session_goes_on(transcriber):
    engine = RecognitionEngine(transcriber, max_batch_size=1).start()

    async def scenario():
        session = await LiveSession(engine, max_pending_seconds=3.0, streaming=STREAMING).start()
        session.append(np.zeros(2 * 16000, np.float32))
        with pytest.raises(PendingAudioLimitError, match="3 s already wait"):
            session.append(np.zeros(2 * 16000, np.float32))
        await session.close()
        return session.events.qsize()

    try:
        assert asyncio.run(scenario()) >= 2  # the first 2 s: a partial, a final, the end
    finally:
        engine.stop()


def test_live_session_slots_are_taken_at_start_and_given_back_however_a_session_ends(transcriber, monkeypatch):
    engine = RecognitionEngine(transcriber, max_batch_size=1).start()
    slots = LiveSessionSlots(2)

    async def scenario():
        first = await LiveSession(engine, streaming=STREAMING, slots=slots).start()
        second = await LiveSession(engine, streaming=STREAMING, slots=slots).start()
        with pytest.raises(LiveSessionLimitError, match="2 live sessions at once"):
            await LiveSession(engine, streaming=STREAMING, slots=slots).start()
        assert slots.taken == 2
        first.append(np.zeros(16000, np.float32))
        await first.close()  # closed after its final
        await second.cancel()  # left at once, its worker maybe not yet running
        assert slots.taken == 0
        third = await LiveSession(engine, streaming=STREAMING, slots=slots).start()
        await third.close()
        await third.close()  # twice: given back once

        async def unavailable():
            raise ModelUnavailableError("the checkpoint is gone")

        monkeypatch.setattr(engine.models, "get_async", unavailable)
        with pytest.raises(ModelUnavailableError):
            await LiveSession(engine, streaming=STREAMING, slots=slots).start()
        return slots.taken

    try:
        assert asyncio.run(scenario()) == 0
    finally:
        engine.stop()


def test_speech_cleared_mid_utterance_is_dropped_and_the_next_one_is_heard(transcriber, conversation):  # noqa: F811
    wave, _ = conversation
    feeds = [wave[: 2 * 16000], CLEAR, wave[2 * 16000 :]]  # cleared while the first sentence goes on
    events = run_session(transcriber, feeds, voice_activity=VoiceActivitySettings(), commit=False)
    kinds = [(type(event).__name__, getattr(event, "kind", getattr(event, "final", None))) for event in events]
    assert kinds[0] == ("SpeechBoundary", "started") and ("LiveTranscript", True) in kinds
    finals = [event for event in events if isinstance(event, LiveTranscript) and event.final]
    assert [event.utterance for event in finals] == [1] and finals[0].text  # the cleared one has no final


@pytest.mark.parametrize("padding", [600, 2500])
def test_an_utterance_keeps_its_whole_padding_in_whatever_pieces_it_comes(transcriber, conversation, padding):  # noqa: F811
    """LiveKit's turn detection pads by 600 ms after 350 ms of silence, so the end is found before its padding has
    arrived; a padding of 2.5 s reaches further back than the audio kept by default. The same utterances either
    way, whether the audio comes whole or in 20 ms pieces."""
    wave, spans = conversation
    first = wave[: int((spans[0][1] + 0.3) * 16000)]
    wave = np.concatenate([np.zeros(3 * 16000, np.float32), first, np.zeros(3 * 16000, np.float32)])
    settings = VoiceActivitySettings(0.5, padding, 350)
    whole = run_session(transcriber, [wave], voice_activity=settings, commit=False)
    pieces = [wave[i : i + 320] for i in range(0, len(wave), 320)]
    pieces = run_session(transcriber, pieces, voice_activity=settings, commit=False)
    # the same events in each task's order (the listening task's and the transcribing one's interleave as they may)
    assert listened(pieces) == listened(whole) and transcribed(pieces) == transcribed(whole)
    started, stopped = (event for event in whole if isinstance(event, SpeechBoundary))
    (committed,) = (event for event in whole if isinstance(event, Committed))
    assert started.seconds == pytest.approx(3 + spans[0][0] - padding / 1000, abs=0.1)
    assert committed.seconds == pytest.approx(stopped.seconds - started.seconds, abs=1e-3)


def test_voice_activity_and_commits_do_not_wait_for_passes(transcriber, conversation):  # noqa: F811
    """Every pass held in the engine: both sentences still start, stop and are committed as their audio is heard,
    before any transcript; once the passes run, each final follows."""
    wave, _ = conversation
    engine = RecognitionEngine(transcriber, max_batch_size=2).start()
    submit, gate = engine.submit, None

    async def held(job):
        await gate.wait()
        async for token in submit(job):
            yield token

    engine.submit = held

    async def scenario():
        nonlocal gate
        gate = asyncio.Event()
        session = await LiveSession(engine, voice_activity=VoiceActivitySettings(), streaming=STREAMING).start()
        for start in range(0, len(wave), 1600):  # 100 ms pieces
            session.append(wave[start : start + 1600])
            await asyncio.sleep(0)
        heard = []
        while len(heard) < 6:
            heard.append(await asyncio.wait_for(session.events.get(), 30))
        gate.set()
        await session.close()
        rest = []
        while (event := session.events.get_nowait()) is not None:
            rest.append(event)
        return heard, rest

    try:
        heard, rest = asyncio.run(scenario())
    finally:
        engine.stop()
    kinds = [(type(event).__name__, event.utterance, getattr(event, "kind", None)) for event in heard]
    assert kinds == [
        ("SpeechBoundary", 0, "started"),
        ("SpeechBoundary", 0, "stopped"),
        ("Committed", 0, None),
        ("SpeechBoundary", 1, "started"),
        ("SpeechBoundary", 1, "stopped"),
        ("Committed", 1, None),
    ]
    finals = [event for event in rest if isinstance(event, LiveTranscript) and event.final]
    assert [event.utterance for event in finals] == [0, 1] and all(event.text for event in finals)


def test_a_transcribing_task_that_fails_ends_the_session_with_an_error(transcriber, caplog):
    engine = RecognitionEngine(transcriber, max_batch_size=1).start()

    async def broken(job):
        raise RuntimeError("secret detail")
        yield  # an async generator, as the engine's submit is

    engine.submit = broken

    async def scenario():
        session = await LiveSession(engine, streaming=STREAMING).start()
        session.append(np.zeros(3 * 16000, np.float32))  # a whole 2 s chunk: a pass
        events = []
        while (event := await asyncio.wait_for(session.events.get(), 30)) is not None:
            events.append(event)
        return events

    try:
        events = asyncio.run(scenario())
    finally:
        engine.stop()
    assert [type(event) for event in events] == [TranscriptionFailedError]
    assert "secret detail" not in str(events[0]) and "a live session failed" in caplog.text
