"""Deterministic speech-like signals for tests and benchmarks (no recordings ship with the project): a voiced
glide of seven harmonics under a four-syllables-a-second envelope."""

from __future__ import annotations

import numpy as np


def voiced_glide(seconds: float, rate: int = 16000, pitch: float = 140.0) -> np.ndarray:
    """[samples] float32 at `rate`, peaking near 0.5; `pitch` (Hz) varies the voice between clips."""
    t = np.arange(int(rate * seconds)) / rate
    phase = 2 * np.pi * np.cumsum(pitch + 40 * np.sin(2 * np.pi * 0.7 * t)) / rate
    envelope = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5
    return (0.2 * envelope * sum(np.sin(k * phase) / k for k in range(1, 8))).astype(np.float32)
