"""Joining separately generated segments: short fades where two meet, so the join does not click."""

from __future__ import annotations

import numpy as np

SEAM_FADE_SAMPLES = 240  # 10 ms at 24 kHz


def fade_seams(audio: np.ndarray, fade_in: bool, fade_out: bool) -> np.ndarray:
    """A float32 copy of `audio` with a raised-sine fade over its first and/or last 10 ms."""
    audio = audio.astype(np.float32, copy=True)
    ramp = np.sin(np.linspace(0.0, np.pi / 2, min(SEAM_FADE_SAMPLES, len(audio)), dtype=np.float32)) ** 2
    if fade_in:
        audio[: len(ramp)] *= ramp
    if fade_out:
        audio[len(audio) - len(ramp) :] *= ramp[::-1]
    return audio
