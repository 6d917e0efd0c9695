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
    "base": {"size": "tiny", "model_type": "base", "seed": 2},
}

# Reference recordings for cloning, written by `write_reference`: (sample rate, channels, subtype, seconds).
REFERENCES = {
    "ref_16k_mono.wav": (16000, 1, "PCM_16", 2.3),
    "ref_22k_mono.wav": (22050, 1, "PCM_16", 3.1),
    "ref_44k_stereo.wav": (44100, 2, "PCM_16", 1.7),
    "ref_48k_stereo_24bit.wav": (48000, 2, "PCM_24", 2.6),
    "ref_24k_mono.flac": (24000, 1, "PCM_16", 4.0),
}
REF_TEXT = {
    "ref_16k_mono.wav": "This is the voice I would like you to copy.",
    "ref_22k_mono.wav": "我想让你模仿这个声音说话。",
    "ref_44k_stereo.wav": "Short stereo sample.",
    "ref_48k_stereo_24bit.wav": "A higher rate recording, twenty four bits deep.",
    "ref_24k_mono.flac": "Lossless reference audio for the clone.",
}
# Each batch is one official generate_voice_clone call (default non_streaming_mode=False).
CLONE_BATCHES = {
    "clone_xvec_english": [
        {
            "text": "Hello, I am speaking with a borrowed voice.",
            "language": "English",
            "ref": "ref_44k_stereo.wav",
            "x_vector_only": True,
        }
    ],
    "clone_icl_chinese": [{"text": "今天我们用克隆的声音说话。", "language": "Chinese", "ref": "ref_22k_mono.wav"}],
    "clone_icl_english": [
        {"text": "In context cloning continues the reference.", "language": "English", "ref": "ref_16k_mono.wav"}
    ],
    "clone_icl_whole_text": [
        {
            "text": "Whole text mode for a clone.",
            "language": "English",
            "ref": "ref_48k_stereo_24bit.wav",
            "whole_text": True,
        }
    ],
    "clone_batch": [
        {"text": "In context cloning continues the reference.", "language": "English", "ref": "ref_16k_mono.wav"},
        {"text": "今天我们用克隆的声音说话。", "language": "Chinese", "ref": "ref_22k_mono.wav"},
        {
            "text": "Hello, I am speaking with a borrowed voice.",
            "language": "English",
            "ref": "ref_44k_stereo.wav",
            "x_vector_only": True,
        },
        {"text": "The flac file speaks here.", "language": "Auto", "ref": "ref_24k_mono.flac"},
    ],
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


def write_reference(path: Path, name: str, spec: tuple[int, int, str, float] | None = None) -> Path:
    """A deterministic speech-like reference: a gliding harmonic tone under a syllable-rate envelope,
    breath noise, and quiet gaps; written with soundfile so both environments read the same bytes. `spec`
    (sample rate, channels, subtype, seconds) for a recording not among REFERENCES."""
    import soundfile as sf

    rate, channels, subtype, seconds = spec or REFERENCES[name]
    rng = np.random.default_rng(sum(name.encode()))
    t = np.arange(int(rate * seconds)) / rate
    pitch = 140 + 40 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5
    mono = 0.2 * voice * envelope + 0.01 * rng.standard_normal(len(t))
    data = np.stack([mono * (1 - 0.3 * c) for c in range(channels)], axis=1)
    target = path / name
    sf.write(target, data.astype(np.float32), rate, subtype=subtype)
    return target


def random_codes(frames: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + frames).integers(0, 2048, size=(frames, 16), dtype=np.int64)
