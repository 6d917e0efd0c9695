"""Word timestamps served: a live server hosting a speech model, a Qwen3-ASR transcriber and the ForcedAligner
that times its words (tiny random weights). OpenAI's verbose_json words, srt and vtt through the openai SDK, and
the earlier ASR server's `return_timestamps` and `POST /v1/audio/subtitles` as its clients send them: every word
and time is what the transcriber and aligner give offline for the same bytes."""

from __future__ import annotations

import dataclasses
import io
import json
import re

import pytest
import soundfile as sf

from qwen3_tts_server.model.asr.aligner import TimedWord
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave
from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import ENV, sdk

SECONDS = 1.5
CUE = r"(?:(\d+)\n)?(\d\d):(\d\d):(\d\d)[,.](\d{3}) --> (\d\d):(\d\d):(\d\d)[,.](\d{3})\n(.+(?:\n.+)?)\n\n"


@pytest.fixture(scope="module")
def server(both_families):
    models = ("--model", str(both_families["asr"]), "--model", str(both_families["aligner"]))
    with live_process("serve", both_families["speech"], *models, env=ENV) as live:
        yield live


@pytest.fixture(scope="module")
def clip() -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, voiced_glide(SECONDS, 16000, pitch=120.0), 16000, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def expected(both_families, clip):
    """The transcript and words offline, English forced, as every request below asks."""
    transcriber = Transcriber(load_asr_checkpoint(both_families["asr"]), load_asr_checkpoint(both_families["aligner"]))
    (result,) = transcriber.transcribe([heard_wave(clip, "clip")], ["English"], timestamps=True)
    assert result.words, "the random model's transcript has words to time"
    assert max(word.end for word in result.words) > SECONDS  # the random aligner's times run past the audio...
    words = [TimedWord(w.text, min(w.start, SECONDS), min(w.end, SECONDS)) for w in result.words]
    return dataclasses.replace(result, words=words)  # ...which the server ends at the audio's end


def first_cue_start(expected) -> float:
    """The first word's start, or earlier where the cue must start earlier to show 0.833 s within the audio."""
    return round(min(expected.words[0].start, SECONDS - 0.833), 3)


def seconds(hours: str, minutes: str, whole: str, milliseconds: str) -> float:
    return int(hours) * 3600 + int(minutes) * 60 + int(whole) + int(milliseconds) / 1000


def cues_of(document: str) -> list[tuple[float, float, str]]:
    """A SubRip or WebVTT body's cues; everything in it must be a cue."""
    assert re.sub(CUE, "", document) == "", document
    return [(seconds(*cue[1:5]), seconds(*cue[5:9]), cue[9]) for cue in re.findall(CUE, document)]


def test_verbose_json_words_are_the_aligners(server, expected, clip):
    client = sdk(server)
    options = {"model": "whisper-1", "file": ("clip.wav", clip), "language": "en", "response_format": "verbose_json"}
    both = client.audio.transcriptions.create(timestamp_granularities=["word", "segment"], **options)
    words_only = client.audio.transcriptions.create(timestamp_granularities=["word"], **options)
    assert both.text == expected.text and len(both.segments) == 1
    timed = [(word.word, word.start, word.end) for word in both.words]
    assert timed == [(word.text, word.start, word.end) for word in expected.words]
    assert all(0 <= start <= end <= SECONDS for _, start, end in timed)
    assert [start for _, start, _ in timed] == sorted(start for _, start, _ in timed)
    assert [(w.word, w.start, w.end) for w in words_only.words] == timed and words_only.segments is None


def test_srt_and_vtt_cues_show_the_transcript_at_the_aligners_times(server, expected, clip):
    client = sdk(server)
    options = {"model": "whisper-1", "file": ("clip.wav", clip), "language": "en"}
    srt = client.audio.transcriptions.create(response_format="srt", **options)
    vtt = client.audio.transcriptions.create(response_format="vtt", **options)
    cues = cues_of(srt)
    assert vtt.startswith("WEBVTT\n\n") and cues_of(vtt.removeprefix("WEBVTT\n\n").replace(".", ",")) == cues
    assert [int(number) for number, *_ in re.findall(CUE, srt)] == list(range(1, len(cues) + 1))
    shown = "".join(text for *_, text in cues).replace("\n", "").replace(" ", "")
    assert shown == expected.text.replace(" ", "")
    assert cues[0][0] == first_cue_start(expected) and all(start < end for start, end, _ in cues)
    assert all(end <= following for (_, end, _), (following, _, _) in zip(cues, cues[1:], strict=False))


def test_the_earlier_servers_timestamps_and_subtitles(server, expected, clip):
    """Its clients' raw fields: `return_timestamps=true` on json and on the stream; /v1/audio/subtitles in both
    modes, an attachment of SubRip text."""
    items = [{"text": w.text, "start_time": w.start, "end_time": w.end} for w in expected.words]
    upload = {"file": ("clip.wav", clip, "audio/wav")}
    with server.client(timeout=300) as http:
        plain = http.post(
            "/v1/audio/transcriptions", data={"language": "en", "return_timestamps": "true"}, files=upload
        )
        stream = http.post(
            "/v1/audio/transcriptions/stream", data={"language": "en", "return_timestamps": "true"}, files=upload
        )
        accurate = http.post("/v1/audio/subtitles", data={"language": "en"}, files=upload)
        fast = http.post(
            "/v1/audio/subtitles", data={"language": "en", "mode": "fast", "max_line_chars": "20"}, files=upload
        )
        bad_mode = http.post("/v1/audio/subtitles", data={"mode": "quick"}, files=upload)
        listed = {entry["id"]: entry for entry in http.get("/v1/models").json()["data"]}
    assert plain.status_code == 200 and plain.json()["timestamps"] == items
    events = [json.loads(line[6:]) for line in stream.text.splitlines() if line.startswith("data: ")]
    assert events == [
        {"text": expected.text, "language": "English", "is_final": True, "timestamps": items},
        {"done": True},
    ]
    for answer in (accurate, fast):
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
        assert answer.headers["content-disposition"] == 'attachment; filename="subtitles.srt"'
        assert "".join(t for *_, t in cues_of(answer.text)).replace("\n", "").replace(" ", "") == expected.text.replace(
            " ", ""
        )
    assert cues_of(accurate.text)[0][0] == first_cue_start(expected)
    fast_cues = cues_of(fast.text)
    assert fast_cues[0][0] == 0.0 and all(
        len(line) <= 20 or " " not in line for *_, t in fast_cues for line in t.split("\n")
    )
    assert bad_mode.status_code == 400 and bad_mode.json()["error"]["param"] == "mode"
    assert listed["asr"]["aligner"] == "aligner" and "aligner" not in listed


def test_a_server_without_an_aligner_refuses_accurate_subtitles_and_serves_fast_ones(both_families, clip):
    transcriber = ("--model", str(both_families["asr"]))
    with (
        live_process("serve", both_families["speech"], *transcriber, env=ENV) as live,
        live.client(timeout=300) as http,
    ):
        accurate = http.post("/v1/audio/subtitles", files={"file": ("clip.wav", clip)})
        fast = http.post("/v1/audio/subtitles", data={"mode": "fast"}, files={"file": ("clip.wav", clip)})
    error = accurate.json()["error"]
    assert accurate.status_code == 400 and error["param"] == "mode" and "mode fast" in error["message"]
    assert fast.status_code == 200 and cues_of(fast.text)
