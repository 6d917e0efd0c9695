"""`qwen3-tts-server transcribe`: every format clients send decodes to what the model hears, the command gives the
official text, JSON with word timestamps, SubRip and WebVTT, and every bad input is one clear line (exit 2)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_cases import ASR_CHECKPOINTS, ASR_FIXTURE_DIR, MAX_NEW_TOKENS, write_asr_clip
from audio_files import encode_with_pyav
from qwen3_tts_server.audio.decoding import decode_audio
from qwen3_tts_server.errors import InvalidInputError
from qwen3_tts_server.model.asr.aligner import TimedWord
from qwen3_tts_server.model.asr.languages import SUPPORTED_LANGUAGES, language_code, resolve_language
from qwen3_tts_server.model.asr.mel import model_wave
from qwen3_tts_server.service.recognition.subtitles import (
    CueRules,
    estimated_words,
    subtitle_cues,
    to_srt,
    to_webvtt,
    two_lines,
    word_spans,
)
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model
from qwen3_tts_server.testing.signals import voiced_glide

pytestmark = pytest.mark.slow

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))
FORMATS = {  # file name: (container, codec, sample rate)
    "mp3.mp3": ("mp3", "libmp3lame", 44100),
    "ogg.ogg": ("ogg", "libopus", 48000),
    "aac.m4a": ("mp4", "aac", 44100),
    "webm.webm": ("webm", "libopus", 48000),
    "flac.flac": ("flac", "flac", 22050),
    "pcm16.wav": ("wav", "pcm_s16le", 16000),
    "mulaw.wav": ("wav", "pcm_mulaw", 8000),
    "alaw.wav": ("wav", "pcm_alaw", 8000),
}


def speech(seconds: float, rate: int) -> np.ndarray:
    return voiced_glide(seconds, rate)[:, None]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("formats")
    written = {}
    for name, (container, codec, rate) in FORMATS.items():
        written[name] = folder / name
        written[name].write_bytes(encode_with_pyav(speech(2.0, rate), rate, container, codec))
    return written


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("asr")
    return {name: make_asr_test_model(root / name, **ASR_CHECKPOINTS[name]) for name in ("asr", "forced_aligner")}


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_decodes_to_the_16k_wave_the_model_hears(files, name):
    samples, rate = decode_audio(files[name].read_bytes())
    assert rate == FORMATS[name][2] and samples.shape[0] == 1
    wave = model_wave(samples.T, rate).numpy()
    assert abs(len(wave) / 16000 - 2.0) < 0.1  # lossy encoders' priming and padding only
    expected = model_wave(speech(2.0, 16000), 16000).numpy()
    # Lossy codecs delay the wave by their priming: the best of the shifts up to 100 ms matches the source.
    span = 16000  # the first second
    best = max(np.corrcoef(wave[shift : shift + span], expected[:span])[0, 1] for shift in range(0, 1600, 4))
    assert best > 0.95


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "qwen3_tts_server", "transcribe", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300, check=False)


def test_the_command_gives_the_official_text_and_reads_every_format(checkpoints, files, tmp_path):
    reference = write_asr_clip(tmp_path, "ref_16k_mono.wav")
    inputs = [str(reference), *(str(files[name]) for name in FORMATS)]
    out = tmp_path / "out"
    done = run(*inputs, "--model", str(checkpoints["asr"]), "--format", "json", "-o", str(out), "--max-new-tokens",
               str(MAX_NEW_TOKENS))  # fmt: skip
    assert done.returncode == 0, done.stderr
    official = ORACLE["transcribe"]["asr"]["plain"]["parsed"][0]
    first = json.loads((out / "ref_16k_mono.json").read_text(encoding="utf-8"))
    assert (first["language"], first["text"], first["duration"]) == (official["language"], official["text"], 2.3)
    assert first["truncated"] and "words" not in first
    for name in FORMATS:
        document = json.loads((out / (Path(name).stem + ".json")).read_text(encoding="utf-8"))
        assert document["text"] and abs(document["duration"] - 2.0) < 0.1, name
    assert "real time" in done.stderr and "token budget" in done.stderr


def test_subtitles_and_word_timestamps_come_from_the_aligner(checkpoints, tmp_path):
    reference = write_asr_clip(tmp_path, "ref_16k_mono.wav")
    model = ("--model", str(checkpoints["asr"]), "--aligner", str(checkpoints["forced_aligner"]))
    budget = ("--max-new-tokens", str(MAX_NEW_TOKENS), "--language", "en")
    srt = run(str(reference), *model, *budget, "--format", "srt")
    vtt = run(str(reference), *model, *budget, "--format", "vtt")
    words = run(str(reference), *model, *budget, "--format", "json", "--timestamps")
    assert srt.returncode == vtt.returncode == words.returncode == 0, srt.stderr + vtt.stderr + words.stderr
    official = ORACLE["timestamps"]["english"]
    document = json.loads(words.stdout)
    assert document["text"] == official["text"] and document["language_codes"] == ["en"]
    assert [(w["word"], w["start"], w["end"]) for w in document["words"]] == [
        (item["text"], item["start"], item["end"]) for item in official["items"]
    ]
    cue = r"(\d+)\n(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})\n(.+(?:\n.+)?)\n\n"  # one or two lines
    cues = re.findall(cue, srt.stdout)
    assert [int(number) for number, *_ in cues] == list(range(1, len(cues) + 1)) and re.sub(cue, "", srt.stdout) == ""
    assert "".join(text for *_, text in cues).replace(" ", "").replace("\n", "") == document["text"].replace(" ", "")
    assert vtt.stdout.startswith("WEBVTT\n\n")
    assert re.findall(r"(\d\d:\d\d:\d\d)\.(\d{3}) --> ", vtt.stdout) == [tuple(c[1].split(",")) for c in cues]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.wav"], "cannot read missing.wav"),
        (["garbage.wav"], "garbage.wav is not audio in a format this server reads"),
        (["empty.wav"], "empty.wav is empty"),
        (["ok.wav", "--format", "srt"], "--format srt needs word timestamps: pass a ForcedAligner"),
        (["ok.wav", "--timestamps"], "--timestamps needs word timestamps"),
        (["ok.wav", "--language", "klingon"], "unsupported language 'klingon'; Qwen3-ASR transcribes Chinese (zh)"),
        (["ok.wav", "a/ok.wav", "-o", "out"], "several files are named ok"),
        (["ok.wav", "--batch", "0"], "--batch and --max-new-tokens are at least 1"),
        (["blip.wav"], "blip.wav is 10.0 ms long; at least 12.6 ms of audio is needed"),
        (
            ["ok.wav", "--timestamps", "--aligner", "none", "--language", "ko", "--korean-words", "no.dict"],
            "cannot read the Korean word list no.dict",
        ),
    ],
)
def test_bad_input_is_one_clear_line(checkpoints, tmp_path, args, message):
    (tmp_path / "garbage.wav").write_bytes(b"not audio at all" * 10)
    (tmp_path / "empty.wav").write_bytes(b"")
    sf.write(tmp_path / "ok.wav", speech(0.5, 16000), 16000)
    sf.write(tmp_path / "blip.wav", speech(0.01, 16000), 16000)
    (tmp_path / "a").mkdir()
    sf.write(tmp_path / "a" / "ok.wav", speech(0.5, 16000), 16000)
    done = run(*args, "--model", str(checkpoints["asr"]), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and not done.stdout


def test_languages_are_taken_by_name_code_and_tag():
    assert [resolve_language(v) for v in ("en", "EN", "english", "cHINese", "zh-CN", "yue", "zh-HK", "fil", "tl")] == [
        "English", "English", "English", "Chinese", "Chinese", "Cantonese", "Cantonese", "Filipino", "Filipino",
    ]  # fmt: skip
    assert resolve_language(None) is None and resolve_language("  ") is None
    assert resolve_language("auto") is None and resolve_language("Auto") is None  # the earlier server's "identify"
    assert len(SUPPORTED_LANGUAGES) == 30 and language_code("japanese") == "ja" and language_code("Klingon") is None
    with pytest.raises(InvalidInputError, match="Macedonian \\(mk\\)") as caught:
        resolve_language("xx", param="language")
    assert caught.value.param == "language"


def test_cues_show_the_transcript_with_its_punctuation():
    text = "Hello, world! Café-au-lait costs 3.5 euros. 我想你。"
    words = ["Hello", "world", "Caféaulait", "costs", "35", "euros", "我", "想", "你"]
    assert [text[a:b] for a, b in word_spans(text, words)] == [
        "Hello,", "world!", "Café-au-lait", "costs", "3.5", "euros.", "我", "想", "你。",
    ]  # fmt: skip
    timed = [TimedWord(word, i * 0.5, i * 0.5 + 0.4) for i, word in enumerate(words)]
    cues = subtitle_cues(text, timed)
    assert [(cue.start, cue.end, cue.text) for cue in cues] == [
        (0.0, 0.9, "Hello, world!"),
        (1.0, 2.9, "Café-au-lait costs 3.5 euros."),
        (3.0, 4.4, "我想你。"),
    ]
    assert subtitle_cues("words the aligner never saw", timed[:2])[0].text == "Hello world"
    long = [TimedWord("word", i * 1.0, i * 1.0 + 0.5) for i in range(20)]
    assert [len(cue.text.split()) for cue in subtitle_cues(" ".join(["word"] * 20), long)] == [7, 7, 6]
    srt = to_srt(subtitle_cues("x", [TimedWord("x", 3725.5, 3726.5)]))
    assert srt == "1\n01:02:05,500 --> 01:02:06,500\nx\n\n"
    assert to_webvtt(subtitle_cues("x", [TimedWord("x", 0.0, 1.0)])) == "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nx\n\n"


def test_cues_break_at_pauses_hold_short_text_and_take_two_lines():
    rules = CueRules(line_characters=20)
    timed = [TimedWord("One", 0.0, 0.2), TimedWord("two", 0.3, 0.4), TimedWord("three", 1.5, 1.7)]
    assert [(c.start, c.end, c.text) for c in subtitle_cues("One two three", timed, rules)] == [
        (0.0, 0.833, "One two"),  # the pause of 1.1 s ends it; held to the least time, the next cue is far
        (1.5, 2.333, "three"),
    ]
    at_the_end = subtitle_cues("x", [TimedWord("x", 1.5, 1.5)], rules, duration=1.5)
    assert [(c.start, c.end) for c in at_the_end] == [(0.667, 1.5)]  # held within the audio: it starts earlier
    close = [TimedWord("One", 0.0, 0.2), TimedWord("Two", 0.9, 1.0)]
    assert [c.end for c in subtitle_cues("One. Two.", close, rules)] == [0.817, 1.733]  # held, ending 83 ms before
    words = ["a", "sentence", "long", "enough", "to", "need", "two", "lines,", "here"]
    timed = [TimedWord(word, i * 0.1, i * 0.1 + 0.1) for i, word in enumerate(words)]
    cues = subtitle_cues(" ".join(words), timed, rules)  # two lines of 20 at most: a break before "lines,"
    assert [cue.text for cue in cues] == ["a sentence long\nenough to need two", "lines, here"]
    assert two_lines("我们今天去公园散步，然后一起吃晚饭吧", 10) == "我们今天去公园散步，\n然后一起吃晚饭吧"
    assert two_lines("short", 10) == "short" and two_lines("unbreakablewordlongerthanlimit", 10).count("\n") == 0


def test_estimated_words_share_a_part_by_length():
    words = estimated_words("Hi there, 你好。", 1.0, 2.0)
    assert [w.text for w in words] == ["Hi", "there,", "你", "好。"]
    assert words[0].start == 1.0 and words[-1].end == 2.0
    assert all(a.end == b.start for a, b in zip(words, words[1:], strict=False))
    assert [c.text for c in subtitle_cues("Hi there, 你好。", words)] == ["Hi there, 你好。"]
