"""The cases both the ASR fixture recorder (tools/make_asr_fixtures.py, official qwen-asr) and this project's
tests run. Plain data only: it must import without this project installed."""

from __future__ import annotations

from pathlib import Path

ASR_FIXTURE_DIR = Path(__file__).parent / "fixtures" / "asr"
MAX_NEW_TOKENS = 32

ASR_CHECKPOINTS = {
    "asr": {"size": "tiny", "model_type": "asr", "seed": 0},
    "forced_aligner": {"size": "tiny", "model_type": "forced_aligner", "seed": 0},
}

# One official transcribe() call each: the audio (parity_cases.write_reference), language and context per item.
TRANSCRIBE_CASES = {
    "plain": [{"audio": "ref_16k_mono.wav", "language": None, "context": ""}],
    "forced_english_with_context": [{"audio": "ref_16k_mono.wav", "language": "English", "context": "Qwen, Alibaba"}],
    "resampled_chinese": [{"audio": "ref_22k_mono.wav", "language": "Chinese", "context": ""}],
    "batch": [
        {"audio": "ref_16k_mono.wav", "language": None, "context": ""},
        {"audio": "ref_44k_stereo.wav", "language": "English", "context": "Short stereo sample."},
    ],
}
ALIGN_CASES = {
    "english": {
        "audio": "ref_16k_mono.wav",
        "text": "This is the voice I would like you to copy.",
        "language": "English",
    },
    "chinese": {"audio": "ref_22k_mono.wav", "text": "我想让你模仿这个声音说话。", "language": "Chinese"},
}
