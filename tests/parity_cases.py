"""The cases both the fixture recorder (tools/make_parity_fixtures.py, official package) and the parity
tests (this project) run. Plain data and helpers only: it must import without this project installed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "parity"
MAX_FRAMES = 24
CODEC_SEED = 1234
CODEC_LENGTHS = (1, 9, 80)  # 80 frames spans more than the decoder's 72-frame attention window

CHECKPOINTS = {
    "custom_voice": {"size": "tiny", "model_type": "custom_voice", "seed": 0},
    "voice_design": {"size": "tiny", "model_type": "voice_design", "seed": 1},
}

# Each batch is one official call; single-row batches double as the "alone" runs of batched rows.
CUSTOM_VOICE_BATCHES = {
    "cv_english": [{"text": "Hello world, this is a test of the server.", "language": "English", "speaker": "Vivian"}],
    "cv_chinese_instruct": [
        {
            "text": "今天天气很好，我们去公园散步吧。",
            "language": "Chinese",
            "speaker": "Serena",
            "instruct": "用温柔而缓慢的语气说",
        }
    ],
    "cv_dialect_beijing": [{"text": "您吃了吗？今儿个真热。", "language": "Chinese", "speaker": "Dylan"}],
    "cv_dialect_auto": [{"text": "巴适得很，走嘛。", "language": "Auto", "speaker": "Eric"}],
    "cv_auto": [{"text": "Guten Morgen! Wie geht es dir heute?", "language": "Auto", "speaker": "Ryan"}],
    "cv_japanese": [{"text": "こんにちは、元気ですか？", "language": "Japanese", "speaker": "Ono_Anna"}],
    "cv_streaming_text": [
        {
            "text": "Streaming text input mode feeds one token per frame.",
            "language": "English",
            "speaker": "Aiden",
            "whole_text": False,
        }
    ],
    "cv_penalty": [{"text": "Bonjour à tous.", "language": "French", "speaker": "Sohee", "repetition_penalty": 1.3}],
    "cv_batch": [
        {"text": "Hello world, this is a test of the server.", "language": "English", "speaker": "Vivian"},
        {
            "text": "今天天气很好，我们去公园散步吧。",
            "language": "Chinese",
            "speaker": "Serena",
            "instruct": "用温柔而缓慢的语气说",
        },
        {"text": "巴适得很，走嘛。", "language": "Auto", "speaker": "Eric"},
        {"text": "Guten Morgen! Wie geht es dir heute?", "language": "Auto", "speaker": "Ryan"},
    ],
}
VOICE_DESIGN_BATCHES = {
    "vd_english": [
        {
            "text": "The quick brown fox jumps over the lazy dog.",
            "language": "English",
            "instruct": "A deep, calm male voice speaking slowly.",
        }
    ],
    "vd_auto": [{"text": "¿Dónde está la biblioteca?", "language": "Auto", "instruct": "Cheerful young woman."}],
    "vd_batch": [
        {
            "text": "The quick brown fox jumps over the lazy dog.",
            "language": "English",
            "instruct": "A deep, calm male voice speaking slowly.",
        },
        {"text": "¿Dónde está la biblioteca?", "language": "Auto", "instruct": "Cheerful young woman."},
    ],
}

TOKENIZER_CORPUS = [
    "Hello, world!",
    "今天天气很好，我们去公园散步吧。",
    "東京タワーは333メートルです。",
    "안녕하세요, 반갑습니다!",
    "Привет, как дела? Ça va très bien, merci. ¿Qué tal?",
    "Emoji: 👋🏽 🎉 👨‍👩‍👧‍👦 and ❤️ in text",
    "mixed中文English日本語한국어 scripts",
    "  leading and trailing spaces  ",
    "tabs\tand\nnew\n\nlines\r\n and   runs   of spaces",
    "1234567890123456789012345678901234567890 3.14159 1,234,567",
    "don't you'll I'M we'VE they'd",
    "<|im_start|>assistant\nspecial tokens inside<|im_end|>\n",
    "ﬁ ligature and e\u0301 combining accent and ① circled",
    "",
]


def checkpoint_digest(directory: Path) -> str:
    """SHA-256 over the relative paths and bytes of every file of a checkpoint directory."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def random_codes(frames: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + frames).integers(0, 2048, size=(frames, 16), dtype=np.int64)
