"""Deterministic random weights for the speaker encoder, named as in an official model.safetensors."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import torch

from ..model.tts.speaker_encoder import SpeakerEncoder, SpeakerEncoderConfig

PREFIX = "speaker_encoder."

# Gains (times He scaling) of some layers, by layer name (top-level) or name suffix (inside every SE-Res2Net
# block): damped residual branches keep the activations from growing block by block, and modest inputs keep
# the sigmoid gates and tanh away from saturation; the larger attention gain makes the pooling non-uniform.
_LAYER_GAINS = {"blocks.0.conv": 0.3, "asp.tdnn.conv": 0.3, "asp.conv": 3.0, "fc": 0.5}
_SUFFIX_GAINS = {".tdnn2.conv": 0.5, ".se_block.conv2": 0.5}
# Log-mels share a large offset (the log of the level), and the pooled ReLU features a positive mean;
# zero-sum filters on these two layers keep them from dominating the embedding with one shared direction.
_ZERO_SUM = ("blocks.0.conv.weight", "fc.weight")


def _gain(layer: str) -> float:
    if layer in _LAYER_GAINS:
        return _LAYER_GAINS[layer]
    return next((gain for suffix, gain in _SUFFIX_GAINS.items() if layer.endswith(suffix)), 1.0)


def random_speaker_encoder_weights(cfg: SpeakerEncoderConfig, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """float32 `speaker_encoder.*` tensors: He-normal convolution weights and small normal biases.

    The official encoder has no batch norm, so there are no running statistics or `num_batches_tracked`
    entries; every parameter is a Conv1d weight or bias. The same generator state gives the same bytes."""
    with torch.device("meta"):
        shapes = {name: tuple(t.shape) for name, t in SpeakerEncoder(cfg).state_dict().items()}
    weights: dict[str, torch.Tensor] = {}
    for name, shape in shapes.items():
        layer = name.rsplit(".", 1)[0]
        if name.endswith(".weight"):
            fan_in = shape[1] * shape[2]
            std = _gain(layer) * math.sqrt(2.0 / fan_in)
        else:
            std = 0.05
        tensor = torch.randn(shape, generator=generator, dtype=torch.float32) * std
        if name in _ZERO_SUM:
            tensor -= tensor.mean(dim=(1, 2), keepdim=True)
        weights[PREFIX + name] = tensor
    return weights


def weights_digest(weights: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the sorted names and the raw little-endian bytes of every tensor."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


# A small `speaker_encoder_config` for fast tests (channel counts divisible by the Res2Net scale of 8).
TINY_SPEAKER_ENCODER_CONFIG: dict[str, Any] = {
    "enc_dim": 64,
    "enc_channels": [32, 32, 32, 32, 96],
    "enc_attention_channels": 16,
    "enc_se_channels": 16,
}


def speaker_encoder_test_signals(sample_rate: int = 24000) -> dict[str, np.ndarray]:
    """Deterministic float32 mono test signals in [-1, 1] (the parity fixtures record them by name)."""
    rng = np.random.default_rng(1234)

    def seconds(duration: float) -> np.ndarray:
        return np.arange(int(round(duration * sample_rate))) / sample_rate

    t = seconds(3.0)
    noise = 0.1 * rng.standard_normal(t.size)
    # Exponential sweep 100 Hz -> 8 kHz: phase = 2 pi f0 T / ln(k) * (k^(t/T) - 1).
    ratio = 8000.0 / 100.0
    sweep = 0.5 * np.sin(2 * np.pi * 100.0 * 3.0 / np.log(ratio) * (ratio ** (t / 3.0) - 1.0))
    signals = {
        "noise": noise,
        "sweep": sweep,
        "short": _voiced(seconds(1.1), 140.0, rng),
        "long": _voiced(seconds(10.0), 210.0, rng),
    }
    return {name: np.clip(x, -1.0, 1.0).astype(np.float32) for name, x in signals.items()}


def _voiced(t: np.ndarray, f0: float, rng: np.random.Generator) -> np.ndarray:
    """Speech-like: harmonics of a wandering pitch with decaying partials, a syllable-rate envelope, and noise."""
    pitch = f0 * (1.0 + 0.15 * np.sin(2 * np.pi * 0.7 * t) + 0.05 * np.sin(2 * np.pi * 3.1 * t))
    phase = 2 * np.pi * np.cumsum(pitch) * (t[1] - t[0])
    voiced = sum(np.sin(k * phase) / k**1.2 for k in range(1, 16))
    envelope = np.clip(np.sin(2 * np.pi * 4.0 * t) + 0.3, 0.0, None)
    return 0.2 * envelope * voiced + 0.01 * rng.standard_normal(t.size)
