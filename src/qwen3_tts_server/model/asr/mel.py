"""The log-mel front end of Qwen3-ASR, as the official processor computes it (Whisper's feature extractor, torch
path): 128 slaney-scaled mel bins of the power spectrum of 25 ms Hann windows every 10 ms at 16 kHz, log10 floored
8 below the clip's loudest value, then scaled. The floor makes every frame depend on the loudest one anywhere in
the clip, so a clip's features are computed whole."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ...audio.decoding import resample

SAMPLE_RATE = 16000
N_FFT = 400  # 25 ms
HOP = 160  # 10 ms: one feature frame per 160 samples
MEL_BINS = 128
TOP_HZ = 8000.0
FLOOR = 8.0  # log10 units below the clip's maximum


def _hz_to_mel(hz: float) -> float:
    """Slaney's scale: linear to 1 kHz (3 mels per 200 Hz), logarithmic above (27 mels per factor 6.4)."""
    return 3 * hz / 200 if hz < 1000 else 15 + 27 * math.log(hz / 1000) / math.log(6.4)


def _mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    return torch.where(mel < 15, 200 * mel / 3, 1000 * torch.exp(math.log(6.4) / 27 * (mel - 15)))


@functools.cache
def mel_filters(bins: int = MEL_BINS, n_fft: int = N_FFT, rate: int = SAMPLE_RATE, top: float = TOP_HZ) -> torch.Tensor:
    """[bins, n_fft // 2 + 1] triangular filters between mel-spaced edges, each scaled to unit area (slaney
    normalisation); computed in float64, returned in float32 as the official extractor uses them."""
    frequencies = torch.linspace(0, rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    edges = _mel_to_hz(torch.linspace(_hz_to_mel(0.0), _hz_to_mel(top), bins + 2, dtype=torch.float64))
    widths = edges.diff()
    offsets = edges[None, :] - frequencies[:, None]  # [frequencies, edges]
    rising = -offsets[:, :-2] / widths[:-1]
    falling = offsets[:, 2:] / widths[1:]
    weights = torch.clamp(torch.minimum(rising, falling), min=0.0)
    weights *= 2.0 / (edges[2:] - edges[:-2])
    return weights.T.to(torch.float32).contiguous()


def log_mel(wave: torch.Tensor) -> torch.Tensor:
    """[MEL_BINS, samples // HOP] features of a mono 16 kHz float32 clip."""
    window = torch.hann_window(N_FFT, device=wave.device)
    spectrum = torch.stft(wave.float(), N_FFT, HOP, window=window, return_complex=True)
    power = spectrum[..., :-1].abs() ** 2  # the centred STFT's last frame is dropped
    mels = torch.clamp(mel_filters().to(wave.device) @ power, min=1e-10).log10()
    return (torch.maximum(mels, mels.max() - FLOOR) + 4.0) / 4.0


def checkpoint_features(wave: np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[mel bins, frames] of a 16 kHz mono part on `device` in `dtype` (as the official processor's output is
    cast to the model's)."""
    wave_tensor = torch.from_numpy(np.ascontiguousarray(wave, dtype=np.float32)).to(device)
    return log_mel(wave_tensor).to(dtype)


def model_wave(samples: np.ndarray, rate: int) -> torch.Tensor:
    """What the model hears of decoded audio ([frames] or [frames, channels], float): the channels' mean, resampled
    to 16 kHz by soxr's high quality (then cut or zero-padded to ceil(frames * 16000 / rate), as the official
    resampler leaves it), divided by its peak only where that exceeds 1."""
    mono = resample((samples.mean(axis=1) if samples.ndim == 2 else samples).astype(np.float32), rate, SAMPLE_RATE)
    peak = float(np.abs(mono).max(initial=0.0))
    if peak > 1.0:
        mono = mono / peak
    return torch.from_numpy(np.clip(mono, -1.0, 1.0))
