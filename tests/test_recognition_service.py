"""Transcribing an upload through the recognition engine (service/recognition/transcription.py), on the tiny
random-weight transcriber: the transcript is the one the transcriber gives offline for the same bytes, long audio
included; the streamed text arrives in order and adds up to what was decoded; bad input is refused before anything is
queued; a client that leaves cancels every part."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from asr_cases import ASR_CHECKPOINTS
from qwen3_tts_server.engine.recognition import DecodedToken, RecognitionEngine, TranscriptionJob
from qwen3_tts_server.errors import InvalidInputError, UnsupportedMediaError
from qwen3_tts_server.model.asr import long_audio
from qwen3_tts_server.model.asr import transcriber as transcriber_module
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave
from qwen3_tts_server.model.asr.transcript import ASR_TEXT
from qwen3_tts_server.service.recognition import transcription as recognition
from qwen3_tts_server.service.recognition.transcription import (
    RecognitionService,
    TextDelta,
    Transcript,
    TranscriptionRequest,
    TranscriptSegment,
    visible_text,
)
from qwen3_tts_server.testing.signals import voiced_glide

BUDGET = 20


@pytest.fixture(scope="module")
def transcriber(tmp_path_factory) -> Transcriber:
    from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model

    directory = make_asr_test_model(tmp_path_factory.mktemp("asr") / "asr", **ASR_CHECKPOINTS["asr"])
    return Transcriber(load_asr_checkpoint(directory))


def shorter_parts(monkeypatch, seconds: float) -> None:
    """Parts of at most `seconds` instead of 20 minutes, each cut looked for within 0.3 s instead of 5."""
    for module in (recognition, transcriber_module):
        monkeypatch.setattr(module, "MAX_SECONDS", seconds)
    monkeypatch.setattr(long_audio, "SEARCH_SECONDS", 0.3)


def wav_bytes(wave: np.ndarray, rate: int = 16000, subtype: str = "PCM_16") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, wave, rate, format="WAV", subtype=subtype)
    return buffer.getvalue()


def run(transcriber: Transcriber, scenario):
    engine = RecognitionEngine(transcriber, max_batch_size=4).start()
    try:
        return asyncio.run(scenario(RecognitionService(engine), engine))
    finally:
        engine.stop()


async def events(service: RecognitionService, request: TranscriptionRequest) -> list:
    return [event async for event in service.stream(request)]


@pytest.mark.parametrize("language", [None, "en", "Chinese"])
def test_the_transcript_is_the_offline_one_and_the_deltas_add_up_to_it(transcriber, language):
    audio = wav_bytes(voiced_glide(1.5, 22050, pitch=130.0), 22050)
    request = TranscriptionRequest(audio, language, prompt="Qwen", max_new_tokens=BUDGET)
    streamed = run(transcriber, lambda service, _: events(service, request))
    *deltas, segment, transcript = streamed
    assert all(isinstance(delta, TextDelta) and delta.text for delta in deltas) and isinstance(transcript, Transcript)
    assert transcript.segments == (segment,)
    forced = {"en": "English", "Chinese": "Chinese"}.get(language)
    (offline,) = transcriber.transcribe([heard_wave(audio, "clip")], [forced], ["Qwen"], max_new_tokens=BUDGET)
    assert (transcript.language, transcript.text) == (offline.language, offline.text)
    assert transcript.tokens == offline.tokens and transcript.truncated == offline.truncated
    assert transcript.parts == 1 and transcript.seconds == pytest.approx(1.5, abs=1e-3)
    decoded = transcriber.model.tokenizer.decode(offline.part_tokens[0], skip_special=True)
    streamed = "".join(delta.text for delta in deltas)
    assert streamed == transcript.text and streamed.startswith(visible_text(decoded, forced is not None).strip())


def test_the_servers_token_budget_cuts_each_part_and_names_the_parts_cut(transcriber, monkeypatch):
    shorter_parts(monkeypatch, 2.0)
    wave = np.concatenate([voiced_glide(1.9, pitch=110.0), np.zeros(1600, np.float32), voiced_glide(2.2, pitch=200.0)])
    audio = wav_bytes(wave)

    async def scenario(engine: RecognitionEngine) -> Transcript:
        return await RecognitionService(engine, max_new_tokens=7).transcribe(TranscriptionRequest(audio))

    engine = RecognitionEngine(transcriber, max_batch_size=4).start()
    try:
        transcript = asyncio.run(scenario(engine))
    finally:
        engine.stop()
    (offline,) = transcriber.transcribe([heard_wave(audio, "clip")], max_new_tokens=7)
    assert [list(segment.tokens) for segment in transcript.segments] == offline.part_tokens
    stop = transcriber.model.tokens.stop
    cut = tuple(number for number, ids in enumerate(offline.part_tokens, 1) if ids[-1] not in stop and len(ids) == 7)
    assert cut and transcript.cut_parts == cut and transcript.truncated == offline.truncated


def test_long_audio_is_cut_and_its_parts_joined_in_order(transcriber, monkeypatch):
    shorter_parts(monkeypatch, 2.0)
    wave = np.concatenate([voiced_glide(1.9, pitch=110.0), np.zeros(1600, np.float32), voiced_glide(2.2, pitch=200.0)])
    audio = wav_bytes(wave)
    request = TranscriptionRequest(audio, max_new_tokens=BUDGET)
    *streamed, transcript = run(transcriber, lambda service, _: events(service, request))
    deltas = [event for event in streamed if isinstance(event, TextDelta)]
    assert tuple(event for event in streamed if isinstance(event, TranscriptSegment)) == transcript.segments
    (offline,) = transcriber.transcribe([heard_wave(audio, "clip")], max_new_tokens=BUDGET)
    assert len(offline.part_tokens) == transcript.parts == 3
    assert (transcript.language, transcript.text, transcript.tokens) == (offline.language, offline.text, offline.tokens)
    segments = transcript.segments
    assert [list(segment.tokens) for segment in segments] == offline.part_tokens
    assert segments[0].start == 0 and segments[-1].end == pytest.approx(transcript.seconds, abs=1e-3)
    assert all(a.end == pytest.approx(b.start, abs=1e-3) for a, b in zip(segments, segments[1:], strict=False))
    assert "".join(segment.text for segment in segments) == transcript.text
    assert "".join(delta.text for delta in deltas) == transcript.text


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        (TranscriptionRequest(b"not audio at all" * 10), UnsupportedMediaError, "the file is not audio"),
        (TranscriptionRequest(b""), InvalidInputError, "the file is empty"),
        (TranscriptionRequest(wav_bytes(np.zeros(100, np.float32))), InvalidInputError, "at least 12.6 ms"),
        (TranscriptionRequest(wav_bytes(voiced_glide(0.5)), "klingon"), InvalidInputError, "unsupported language"),
    ],
)
def test_bad_input_is_refused_before_anything_is_queued(transcriber, request_, error, message):
    async def scenario(service, engine):
        with pytest.raises(error, match=message) as refused:
            await service.transcribe(request_)
        return refused.value, engine.waiting + engine.active

    refused, queued = run(transcriber, scenario)
    assert queued == 0 and refused.status in (400, 415)
    assert refused.param == ("language" if "language" in message else "file")


def test_a_client_that_leaves_cancels_every_part(transcriber, monkeypatch):
    shorter_parts(monkeypatch, 1.0)
    audio = wav_bytes(voiced_glide(4.5, pitch=150.0))

    async def scenario(service, engine):
        stream = service.stream(TranscriptionRequest(audio, "English", max_new_tokens=300))
        await anext(stream)  # the first text; every part is decoding or waiting
        busy = engine.waiting + len(engine._active)
        await stream.aclose()
        for _ in range(300):
            if engine.idle:
                break
            await asyncio.sleep(0.01)
        return busy, engine.idle

    busy, idle = run(transcriber, scenario)
    assert busy >= 4 and idle


@pytest.mark.parametrize("language", [None, "en"])
def test_logprobs_are_the_transcript_tokens_given_with_the_deltas_they_make(transcriber, language):
    audio = wav_bytes(voiced_glide(1.5, 22050, pitch=130.0), 22050)
    request = TranscriptionRequest(audio, language, max_new_tokens=BUDGET, logprobs=True)
    *streamed, transcript = run(transcriber, lambda service, _: events(service, request))
    deltas = [event for event in streamed if isinstance(event, TextDelta)]
    (segment,) = [event for event in streamed if isinstance(event, TranscriptSegment)]
    assert tuple(item for delta in deltas for item in delta.logprobs) == transcript.logprobs
    tokenizer = transcriber.model.tokenizer
    ids = list(segment.tokens)
    tagged = [count for count in range(len(ids) + 1) if ASR_TEXT in tokenizer.decode(ids[:count])]
    header = tagged[0] if tagged and not language else 0  # the tokens up to the header's <asr_text> tag, if any
    stop = transcriber.model.tokens.stop
    text_ids = [token for token in ids[header:] if token not in stop]
    assert len(transcript.logprobs) == len(text_ids) > 0
    assert "".join(item.token for item in transcript.logprobs) == tokenizer.decode(text_ids, skip_special=True)
    assert all(item.logprob <= 0 and bytes(item.bytes) == item.token.encode() for item in transcript.logprobs)
    plain = run(
        transcriber, lambda service, _: service.transcribe(TranscriptionRequest(audio, language, max_new_tokens=BUDGET))
    )
    assert plain.logprobs == () and plain.text == transcript.text


class ScriptedEngine:
    """Answers each part with the tokens of the output scripted for its forced language (None: the model's to
    identify), and keeps the parts sent."""

    def __init__(self, transcriber: Transcriber, outputs: dict[str | None, str]):
        self.transcriber, self.outputs = transcriber, outputs
        self.sent: list[TranscriptionJob] = []
        self.models = SimpleNamespace(get_async=self.model)

    async def model(self) -> Transcriber:
        return self.transcriber

    def submit_in_order(self, jobs: list[TranscriptionJob], clock) -> list:
        self.sent += jobs
        return [self.stream(job) for job in jobs]

    def stream(self, job: TranscriptionJob) -> ScriptedStream:
        tokens = self.transcriber.model.tokens
        return ScriptedStream([*self.transcriber.model.tokenizer.encode(self.outputs[job.language]), min(tokens.stop)])


class ScriptedStream:
    def __init__(self, ids: list[int]):
        self.ids, self.index = ids, 0

    def __aiter__(self) -> ScriptedStream:
        return self

    async def __anext__(self) -> DecodedToken:
        if self.index == len(self.ids):
            raise StopAsyncIteration
        self.index += 1
        last = self.index == len(self.ids)
        return DecodedToken(self.ids[self.index - 1], self.index - 1, -0.1, 0.0, 0.0, "stop" if last else None)

    def cancel(self) -> None:
        self.index = len(self.ids)


def test_several_languages_allow_any_of_them_and_a_part_heard_in_another_is_transcribed_in_the_first(transcriber):
    """The header names the language before any text: a part heard outside the list is sent again, the first listed
    forced, and nothing of what it was first heard as is shown."""
    outputs = {None: "language German<asr_text>Hallo Welt", "English": "Hello world", "French": "Bonjour"}
    audio = wav_bytes(voiced_glide(0.5))

    def transcribe(**fields) -> tuple[list[TextDelta], Transcript, list[tuple[str | None, bool]]]:
        engine = ScriptedEngine(transcriber, outputs)
        *streamed, transcript = asyncio.run(events(RecognitionService(engine), TranscriptionRequest(audio, **fields)))
        deltas = [event for event in streamed if isinstance(event, TextDelta)]
        return deltas, transcript, [(job.language, job.continuation) for job in engine.sent]

    deltas, transcript, sent = transcribe(languages=("en", "fr"))
    assert (transcript.language, transcript.text, "".join(delta.text for delta in deltas)) == ("English",) + (
        "Hello world",
    ) * 2
    assert sent == [(None, False), ("English", True)]
    outputs[None] = "language French<asr_text>Bonjour à tous"
    deltas, transcript, sent = transcribe(languages=("en", "fr"))
    assert (transcript.language, transcript.text, sent) == ("French", "Bonjour à tous", [(None, False)])
    _, transcript, sent = transcribe(languages=("fr",))  # one: forced
    assert (transcript.language, transcript.text, sent) == ("French", "Bonjour", [("French", False)])
    _, transcript, sent = transcribe(language="en", languages=("fr", "de"))  # `language` forces it
    assert (transcript.language, sent) == ("English", [("English", False)])
    with pytest.raises(InvalidInputError, match="unsupported language 'xx'") as refused:
        transcribe(languages=("en", "xx"))
    assert refused.value.param == "languages"
