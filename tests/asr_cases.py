"""The cases both the ASR fixture recorder (tools/make_asr_fixtures.py, official qwen-asr) and this project's
tests run. Plain data only: it must import without this project installed."""

from __future__ import annotations

from pathlib import Path

ASR_FIXTURE_DIR = Path(__file__).parent / "fixtures" / "asr"
MAX_NEW_TOKENS = 32
ENCODER_CUT_CLIP = "ref_16k_mono.wav"  # its first frames, encoded alone: a clip under one chunk, a padded tail
ENCODER_CUTS = (60, 150)

ASR_CHECKPOINTS = {
    "asr": {"size": "tiny", "model_type": "asr", "seed": 0},
    "asr_small": {"size": "small", "model_type": "asr", "seed": 1},  # another seed, wider, an untied head
    "forced_aligner": {"size": "tiny", "model_type": "forced_aligner", "seed": 0},
}
TRANSCRIBERS = ("asr", "asr_small")  # every transcription case is recorded with each

# Recordings beside parity_cases.REFERENCES, written by `write_asr_clip`: (sample rate, channels, soundfile subtype,
# seconds); "silence" ones are all zeros.
ASR_CLIPS = {
    "phone_8k_mulaw.wav": (8000, 1, "ULAW", 2.6),
    "short_16k.wav": (16000, 1, "PCM_16", 0.3),
    "silence_16k.wav": (16000, 1, "PCM_16", 1.5),
    "long_16k.flac": (16000, 1, "PCM_16", 200.0),  # 2,600 audio tokens: 25 attention blocks of 8 s
}


def write_asr_clip(path: Path, name: str) -> Path:
    """A recording of ASR_CLIPS or parity_cases.REFERENCES, written to `path`."""
    from parity_cases import write_reference

    if name not in ASR_CLIPS:
        return write_reference(path, name)
    if not name.startswith("silence"):
        return write_reference(path, name, ASR_CLIPS[name])
    import numpy as np
    import soundfile as sf

    rate, channels, subtype, seconds = ASR_CLIPS[name]
    sf.write(path / name, np.zeros((int(rate * seconds), channels), dtype=np.float32), rate, subtype=subtype)
    return path / name


# One official transcribe() call each: the audio, language and context per item.
TRANSCRIBE_CASES = {
    "plain": [{"audio": "ref_16k_mono.wav", "language": None, "context": ""}],
    "forced_english_with_context": [{"audio": "ref_16k_mono.wav", "language": "English", "context": "Qwen, Alibaba"}],
    "resampled_chinese": [{"audio": "ref_22k_mono.wav", "language": "Chinese", "context": ""}],
    "forced_japanese": [{"audio": "ref_16k_mono.wav", "language": "Japanese", "context": "東京での会議、議事録"}],
    "forced_korean": [{"audio": "ref_22k_mono.wav", "language": "Korean", "context": "서울 회의"}],
    "mixed_context": [{"audio": "ref_44k_stereo.wav", "language": None, "context": "Qwen3 模型 テスト 한국어 mixed"}],
    "phone_mulaw": [{"audio": "phone_8k_mulaw.wav", "language": None, "context": ""}],
    "short": [{"audio": "short_16k.wav", "language": None, "context": ""}],
    "silence": [{"audio": "silence_16k.wav", "language": None, "context": ""}],
    "long": [{"audio": "long_16k.flac", "language": "English", "context": ""}],
    "batch": [
        {"audio": "ref_16k_mono.wav", "language": None, "context": ""},
        {"audio": "ref_44k_stereo.wav", "language": "English", "context": "Short stereo sample."},
    ],
}
# Official transcribe(return_time_stamps=True) calls, the tiny transcriber with the tiny aligner (Korean split with
# KOREAN_TEST_WORDS).
TIMESTAMP_CASES = {
    "english": {"audio": "ref_16k_mono.wav", "language": "English"},
    "chinese": {"audio": "ref_22k_mono.wav", "language": "Chinese"},
    "japanese": {"audio": "ref_16k_mono.wav", "language": "Japanese"},
    "korean": {"audio": "ref_22k_mono.wav", "language": "Korean"},
}
ALIGN_CASES = {
    "english": {
        "audio": "ref_16k_mono.wav",
        "text": "This is the voice I would like you to copy.",
        "language": "English",
    },
    "chinese": {"audio": "ref_22k_mono.wav", "text": "我想让你模仿这个声音说话。", "language": "Chinese"},
    "japanese": {"audio": "ref_16k_mono.wav", "text": "東京の天気は、明日も晴れるでしょう。", "language": "Japanese"},
    "korean": {"audio": "ref_22k_mono.wav", "text": "오늘날 서울의 날씨는 맑습니다.", "language": "Korean"},
}

# The official Korean word list ships inside qwen-asr only; the recorder runs the official Korean splitter with
# this list of our own instead, so the tests check the splitting rule on a list they have.
KOREAN_TEST_WORDS = ("오늘", "오늘날", "서울", "날씨", "학교에", "한국", "한국어", "사람들", "qw")


def write_word_list(path: Path, words=KOREAN_TEST_WORDS) -> Path:
    """A word list in the official Korean list's format (word, count, part of speech), written to `path`."""
    path.write_text("".join(f"{word} 10 n\n" for word in words) + "\n", encoding="utf-8")
    return path


# (transcript, language): the official word split of each, as the aligner receives it.
WORD_SPLIT_CASES = [
    ("東京の天気は、明日も晴れるでしょう。", "Japanese"),
    ("私はＡＩです、2024年に３回「テスト」しました！", "Japanese"),
    ("カタカナとひらがな ｈａｌｆ width, Don't stop.", "japanese"),
    ("오늘날 서울의 날씨는 맑습니다.", "Korean"),
    ("한국어를 배우는 사람들이 학교에서 공부해요!", "Korean"),
    ("나 너 우리, 오늘은... 한국! qwen3 모델 (테스트) 'ok'", "KOREAN"),
    ("Plain English, with 3.5 numbers and don't-stop words.", "English"),
    ("混合 mixed中文text，标点。", "Chinese"),
]

# Decoded outputs read by the official parse_asr_output: (decoded, forced language).
PARSE_CASES = [
    ("language English<asr_text>Hello there.", None),
    ("language cHINese<asr_text> 你好。 ", None),
    ("language None<asr_text>", None),
    ("language None<asr_text>stray words", None),
    ("noise first\nlanguage German\n<asr_text>Guten Tag", None),
    ("language <asr_text>no name", None),
    ("just text, no tag", None),
    ("language English<asr_text>forced anyway", "French"),
    ("   ", None),
    ("language English<asr_text>" + "a" * 19 + "b" * 20 + "c" * 21 + "d" * 40, None),
    ("language English<asr_text>" + "ha" * 19 + " and " + "ho" * 20 + " then " + "hey " * 33, None),
    ("language Chinese<asr_text>" + "好的" * 30 + "结束" + "对" * 25, None),
    ("language English<asr_text>" + "the end of it " * 21 + "x", None),
    ("language English" * 22 + "<asr_text>looped header", None),
    ("language English<asr_text>" + "abcdefghijklmnopqrstuv" * 25, None),
]
MERGE_CASES = [["Chinese", "English", "English", "", "Chinese"], ["", ""], ["English"]]


def split_wave(seconds: float, quiet: list[tuple[float, float]], rate: int = 16000):
    """A deterministic clip for the long-audio split (integer arithmetic, then exact float32 scaling, so both
    environments build the same samples): a buzz, a hundredth as loud inside the `quiet` spans (seconds)."""
    import numpy as np

    index = np.arange(int(seconds * rate), dtype=np.int64)
    wave = ((index * 7919) % 2001 - 1000).astype(np.float32) / np.float32(1000)
    for start, end in quiet:
        wave[int(start * rate) : int(end * rate)] *= np.float32(0.01)
    return wave


# (seconds, quiet spans, the longest part's seconds): split as the official split_audio_into_chunks does.
SPLIT_CASES = {
    "whole": (2.0, [], 3.0),
    "quiet_gaps": (10.3, [(2.2, 2.5), (5.9, 6.4)], 3.0),
    "no_gap": (9.0, [], 3.0),
    "short_tail": (6.2, [(1.0, 1.1)], 3.0),
    "silence": (7.0, [(0.0, 7.0)], 3.0),
    "longer_parts": (30.0, [(7.0, 7.3), (14.5, 14.8), (23.9, 24.2)], 8.0),
}

# Timestamp series (ms) the official aligner repairs (fix_timestamp).
REPAIR_CASES = [
    [80, 4000, 160, 240],
    [80, 160, 240, 320, 0, 0, 0, 800],
    [300, 200, 100],
    [0, 80, 4000, 4000, 160],
    [100, 50, 50, 50, 100, 110],
    [400, 0, 0, 0, 0, 480, 560],
    [160, 80, 240, 80, 320, 0, 0, 400, 80, 480],
    [5, 3, 9, 1, 7],
    [80],
]
