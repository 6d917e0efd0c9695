"""Deterministic random weights and test signals for the speech-tokenizer encoder.

The weights are keyed as in `speech_tokenizer/model.safetensors` (`encoder.*`), so the official package
loads them strictly. Their scales are chosen so that random noise or a chirp reaches the quantizer with
activations of about the codebook vectors' size: the codes then vary from frame to frame and codebook to
codebook, which makes an exact code comparison meaningful.
"""

from __future__ import annotations

import hashlib
import math

import torch

from ..model.tts.codec_encoder import CodecEncoder
from ..model.tts.config import CodecEncoderConfig

PREFIX = "encoder."
# Gain of the SEANet and downsampling convolutions over 1/sqrt(fan_in): with it noise at std 0.3 reaches the
# quantizer at a std of about 2, the codebook vectors' scale.
_CONV_GAIN = 1.2


def _normal(shape: torch.Size, std: float, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator) * std


def _uniform(shape: torch.Size, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    return low + (high - low) * torch.rand(shape, generator=generator)


def _random_tensor(name: str, shape: torch.Size, generator: torch.Generator) -> torch.Tensor:
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "initialized":
        return torch.ones(shape)
    if leaf == "cluster_usage":
        return _uniform(shape, 0.5, 2.0, generator)
    if leaf == "embed_sum":
        return _normal(shape, 1.0, generator)
    if leaf == "scale":  # transformer layer scales: large enough that attention and MLP shape the codes
        return _uniform(shape, 0.2, 0.6, generator)
    if "layernorm" in name:
        return 1.0 + _normal(shape, 0.1, generator) if leaf == "weight" else _normal(shape, 0.1, generator)
    if leaf == "bias":
        return _normal(shape, 0.05, generator)
    fan_in = math.prod(shape[1:])
    if name.startswith(("encoder.", "downsample.")) and len(shape) == 3:
        return _normal(shape, _CONV_GAIN / math.sqrt(fan_in), generator)
    return _normal(shape, 1.0 / math.sqrt(fan_in), generator)  # linear layers, quantizer projections


def random_encoder_weights(cfg: CodecEncoderConfig, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """float32 weights for every `encoder.*` entry of the checkpoint, drawn in key order from `generator`."""
    with torch.device("meta"):
        shapes = {name: t.shape for name, t in CodecEncoder(cfg).state_dict().items()}
    return {PREFIX + name: _random_tensor(name, shape, generator).contiguous() for name, shape in shapes.items()}


def weights_digest(weights: dict[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and bytes, in sorted key order."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def reference_signal(kind: str, samples: int, seed: int, sample_rate: int = 24000) -> torch.Tensor:
    """A deterministic float32 mono signal: "noise" (Gaussian, std 0.3) or "chirp" (100 Hz -> 6 kHz sweep
    with a little noise), drawn with torch so both environments produce the same bytes."""
    generator = torch.Generator().manual_seed(seed)
    if kind == "noise":
        return (torch.randn(samples, generator=generator, dtype=torch.float64) * 0.3).float()
    if kind == "chirp":
        t = torch.arange(samples, dtype=torch.float64) / sample_rate
        duration = max(samples / sample_rate, 1e-9)
        f0, f1 = 100.0, 6000.0
        phase = 2 * math.pi * (f0 * t + (f1 - f0) * t * t / (2 * duration))
        noise = torch.randn(samples, generator=generator, dtype=torch.float64) * 0.01
        return (0.5 * torch.sin(phase) + noise).float()
    raise ValueError(f"unknown test signal kind {kind!r}")


def signal_digest(signal: torch.Tensor) -> str:
    return hashlib.sha256(signal.contiguous().numpy().tobytes()).hexdigest()
