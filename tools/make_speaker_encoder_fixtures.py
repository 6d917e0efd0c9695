"""Record the official qwen-tts 0.1.1 speaker-encoder outputs as test fixtures.

Run it in the oracle environment, from the repository root:

    ORACLE/bin/python tools/make_speaker_encoder_fixtures.py

For a tiny and the real default `speaker_encoder_config` it builds this project's deterministic random weights
(imported from src/), loads them strictly into the official `Qwen3TTSSpeakerEncoder`, and records what the
official `extract_speaker_embedding` returns (float32) for a few deterministic 24 kHz signals, with a hash of
the weights. It also records the official log-mel spectrogram of one signal and librosa's mel filterbank.
Everything goes to tests/fixtures/speaker_encoder/; tests/test_speaker_encoder.py rebuilds and compares.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import librosa  # noqa: E402
import qwen_tts_oracle_stubs  # noqa: E402,F401  (must precede qwen_tts)
import torch  # noqa: E402
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig  # noqa: E402
from qwen_tts.core.models.modeling_qwen3_tts import (  # noqa: E402
    Qwen3TTSForConditionalGeneration,
    Qwen3TTSSpeakerEncoder,
    mel_spectrogram,
)

from qwen3_tts_server.model.tts.speaker_encoder import SpeakerEncoderConfig  # noqa: E402
from qwen3_tts_server.testing.speaker_encoder_weights import (  # noqa: E402
    PREFIX,
    TINY_SPEAKER_ENCODER_CONFIG,
    random_speaker_encoder_weights,
    speaker_encoder_test_signals,
    weights_digest,
)

FIXTURE_DIR = ROOT / "tests" / "fixtures" / "speaker_encoder"
CONFIGS = {"tiny": (TINY_SPEAKER_ENCODER_CONFIG, 7001), "default": ({}, 7002)}
MEL_SIGNAL = "short"


def official_encoder(section: dict, weights: dict[str, torch.Tensor]) -> Qwen3TTSSpeakerEncoder:
    encoder = Qwen3TTSSpeakerEncoder(Qwen3TTSSpeakerEncoderConfig(**section))
    encoder.load_state_dict({name.removeprefix(PREFIX): t for name, t in weights.items()}, strict=True)
    return encoder.eval()


def main() -> None:
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    signals = speaker_encoder_test_signals()
    arrays: dict[str, np.ndarray] = {
        "filterbank": librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000),
        "mel": mel_spectrogram(
            torch.from_numpy(signals[MEL_SIGNAL])[None],
            n_fft=1024,
            num_mels=128,
            sampling_rate=24000,
            hop_size=256,
            win_size=1024,
            fmin=0,
            fmax=12000,
        )[0].numpy(),
    }
    meta: dict = {
        "source": "qwen-tts 0.1.1 Qwen3TTSForConditionalGeneration.extract_speaker_embedding, float32, CPU",
        "torch": torch.__version__,
        "librosa": librosa.__version__,
        "mel_signal": MEL_SIGNAL,
        "signals": {name: int(x.size) for name, x in signals.items()},
        "configs": {},
    }
    for label, (section, seed) in CONFIGS.items():
        cfg = SpeakerEncoderConfig.parse(section)
        weights = random_speaker_encoder_weights(cfg, torch.Generator().manual_seed(seed))
        encoder = official_encoder(section, weights)
        # The official method only reads these three attributes of the model.
        model = SimpleNamespace(speaker_encoder=encoder, device=torch.device("cpu"), dtype=torch.float32)
        for name, audio in signals.items():
            embedding = Qwen3TTSForConditionalGeneration.extract_speaker_embedding(model, audio=audio, sr=24000)
            arrays[f"{label}.{name}"] = embedding.float().numpy()
        meta["configs"][label] = {
            "section": section,
            "seed": seed,
            "weights_sha256": weights_digest(weights),
            "state_dict": {PREFIX + k: list(v.shape) for k, v in encoder.state_dict().items()},
        }
        print(label, meta["configs"][label]["weights_sha256"])

    np.savez_compressed(FIXTURE_DIR / "official.npz", **arrays)
    (FIXTURE_DIR / "official.json").write_text(json.dumps(meta, indent=1) + "\n")
    for path in sorted(FIXTURE_DIR.iterdir()):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
