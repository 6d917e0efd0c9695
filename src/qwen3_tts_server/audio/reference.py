"""Reference audio intake for voice cloning: any common container/codec -> 24 kHz mono float32.

The samples match what the official package feeds its encoders for the same file: channels averaged
in float32 (librosa's `to_mono`), then resampled with soxr at "HQ" quality (librosa's default
`soxr_hq`). Nothing else is done unless asked: an optional stretch of trailing silence can be added
(`tail_silence_ms`), which users of peer servers found stops in-context clones from repeating the
reference's last phoneme at the start of the new speech.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from .decoding import decode_audio, resample

SAMPLE_RATE = 24000
MIN_VOICED_SECONDS = 1.0
MAX_SECONDS = 30.0
# A 20 ms window counts as voiced above -50 dBFS RMS.
VOICED_WINDOW_SECONDS = 0.02
VOICED_RMS = 10 ** (-50 / 20)


@dataclass(frozen=True)
class ReferenceAudio:
    """A decoded reference: 24 kHz mono float32 samples, with where they came from."""

    samples: np.ndarray
    source_rate: int
    source_channels: int
    sha256: str  # of the bytes as received

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def voiced_seconds(samples: np.ndarray, rate: int) -> float:
    window = max(1, int(rate * VOICED_WINDOW_SECONDS))
    usable = len(samples) // window * window
    if usable == 0:
        return 0.0
    rms = np.sqrt(np.mean(samples[:usable].reshape(-1, window).astype(np.float64) ** 2, axis=1))
    return float(np.count_nonzero(rms > VOICED_RMS)) * window / rate


def load_reference(data: bytes, tail_silence_ms: int = 0) -> ReferenceAudio:
    """Validate and convert reference audio bytes to 24 kHz mono; see the module docstring."""
    if tail_silence_ms < 0:
        raise InvalidInputError("reference_tail_silence_ms must be >= 0", param="reference_tail_silence_ms")
    too_long = f"the limit is {MAX_SECONDS:.0f} s (trim it to the part you want cloned)"
    audio, rate = decode_audio(data, "the reference audio", "audio", MAX_SECONDS, too_long)
    mono = np.mean(audio, axis=0) if audio.shape[0] > 1 else audio[0]
    voiced = voiced_seconds(mono, rate)
    if voiced < MIN_VOICED_SECONDS:
        what = "silent" if voiced == 0 else f"only {voiced:.2f} s of non-silent sound"
        raise InvalidInputError(
            f"the reference audio is {what}; at least {MIN_VOICED_SECONDS:.0f} s of speech is needed", param="audio"
        )
    mono = resample(mono, rate, SAMPLE_RATE)
    mono = np.ascontiguousarray(mono, dtype=np.float32)
    if tail_silence_ms:
        mono = np.concatenate([mono, np.zeros(SAMPLE_RATE * tail_silence_ms // 1000, dtype=np.float32)])
    return ReferenceAudio(
        samples=mono, source_rate=rate, source_channels=audio.shape[0], sha256=hashlib.sha256(data).hexdigest()
    )
