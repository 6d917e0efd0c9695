"""Speaker encoder of the Base models: 24 kHz mono audio -> log-mel spectrogram -> ECAPA-TDNN -> x-vector.

Parameter names follow the official `speaker_encoder.*` checkpoint entries (without that prefix), so a parent
module holding a `SpeakerEncoder` as attribute `speaker_encoder` loads the checkpoint as it is. The official
model has no batch norm here, so the state dict holds only convolution weights and biases.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import CheckpointError, InvalidInputError

SAMPLE_RATE = 24000
N_FFT = 1024
N_MELS = 128
HOP_LENGTH = 256
WIN_LENGTH = 1024
F_MIN = 0.0
F_MAX = 12000.0
LOG_FLOOR = 1e-5
MAGNITUDE_EPS = 1e-9
STATS_EPS = 1e-12


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    """`speaker_encoder_config` of config.json (official defaults for absent keys)."""

    mel_dim: int = N_MELS
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    enc_kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    enc_dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    sample_rate: int = SAMPLE_RATE

    @classmethod
    def parse(cls, section: dict[str, Any]) -> SpeakerEncoderConfig:
        where = "config.json speaker_encoder_config"
        defaults = cls()
        try:
            values: dict[str, Any] = {}
            for name in cls.__dataclass_fields__:
                raw = section.get(name, getattr(defaults, name))
                values[name] = tuple(int(v) for v in raw) if isinstance(getattr(defaults, name), tuple) else int(raw)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: malformed value ({exc})") from exc
        cfg = cls(**values)
        cfg._validate(where)
        return cfg

    def _validate(self, where: str) -> None:
        # The official extraction hard-codes a 24 kHz, 128-band mel, so other values cannot run.
        if self.sample_rate != SAMPLE_RATE:
            raise CheckpointError(f"{where}: sample_rate {self.sample_rate} is not supported (only {SAMPLE_RATE})")
        if self.mel_dim != N_MELS:
            raise CheckpointError(f"{where}: mel_dim {self.mel_dim} is not supported (only {N_MELS})")
        channels = self.enc_channels
        if not len(channels) == len(self.enc_kernel_sizes) == len(self.enc_dilations):
            raise CheckpointError(f"{where}: enc_channels, enc_kernel_sizes and enc_dilations differ in length")
        if len(channels) < 3:
            raise CheckpointError(f"{where}: enc_channels needs at least 3 entries")
        positive = (*channels, *self.enc_kernel_sizes, *self.enc_dilations, self.enc_dim)
        positive += (self.enc_attention_channels, self.enc_res2net_scale, self.enc_se_channels)
        if min(positive) < 1:
            raise CheckpointError(f"{where}: sizes, kernel sizes and dilations must be positive")
        inner = channels[1:-1]
        # Each SE-Res2Net block adds its input back, and the aggregation layer takes their concatenation.
        if any(c != channels[0] for c in inner):
            raise CheckpointError(f"{where}: enc_channels[:-1] must all be equal, got {list(channels)}")
        if sum(inner) != channels[-1]:
            raise CheckpointError(f"{where}: enc_channels[-1] must equal the sum of enc_channels[1:-1]")
        if any(c % self.enc_res2net_scale for c in inner):
            raise CheckpointError(f"{where}: enc_channels must be divisible by enc_res2net_scale")

    @property
    def min_frames(self) -> int:
        """Fewest mel frames the reflect-padded convolutions accept (padding must be shorter than the input)."""
        widest = max(d * (k - 1) for k, d in zip(self.enc_kernel_sizes, self.enc_dilations, strict=True))
        return widest - widest // 2 + 1


@functools.lru_cache(maxsize=4)
def _slaney_mel_filterbank_np(sample_rate: int, n_fft: int, n_mels: int, f_min: float, f_max: float) -> np.ndarray:
    linear_step = 200.0 / 3  # Hz per mel below 1 kHz
    log_start_hz = 1000.0
    log_start_mel = log_start_hz / linear_step
    log_step = np.log(6.4) / 27.0

    def hz_to_mel(hz: float) -> float:
        if hz >= log_start_hz:
            return log_start_mel + float(np.log(hz / log_start_hz)) / log_step
        return hz / linear_step

    mels = np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2)
    edges = np.where(
        mels >= log_start_mel,
        log_start_hz * np.exp(log_step * (mels - log_start_mel)),
        linear_step * mels,
    )
    bins = np.fft.rfftfreq(n_fft, d=1.0 / sample_rate)
    widths = np.diff(edges)
    offsets = edges[:, None] - bins[None, :]
    rising = -offsets[:-2] / widths[:-1, None]
    falling = offsets[2:] / widths[1:, None]
    # librosa stores the triangles in float32 before the area normalisation (done in float64, stored in
    # float32); rounding the same way keeps the result bit-identical.
    triangles = np.maximum(0.0, np.minimum(rising, falling)).astype(np.float32)
    area = 2.0 / (edges[2:] - edges[:-2])
    weights = (triangles * area[:, None]).astype(np.float32)
    weights.setflags(write=False)
    return weights


def mel_filterbank(
    sample_rate: int = SAMPLE_RATE,
    n_fft: int = N_FFT,
    n_mels: int = N_MELS,
    f_min: float = F_MIN,
    f_max: float = F_MAX,
) -> torch.Tensor:
    """Slaney-scale, area-normalised triangular mel filters: (n_mels, n_fft // 2 + 1) float32.

    Equals `librosa.filters.mel(sr=..., n_fft=..., n_mels=..., fmin=..., fmax=...)` with its defaults
    (htk=False, norm="slaney"), which is how the official model builds it."""
    weights = _slaney_mel_filterbank_np(int(sample_rate), int(n_fft), int(n_mels), float(f_min), float(f_max))
    return torch.from_numpy(weights.copy())


def log_mel_spectrogram(audio: torch.Tensor) -> torch.Tensor:
    """(batch, samples) or (samples,) float waveform -> (batch, n_mels, frames) natural-log mel magnitudes.

    Reflect-pads (n_fft - hop) / 2 on both sides, then a non-centred periodic-Hann STFT, magnitude
    sqrt(re^2 + im^2 + 1e-9), mel projection and log(max(x, 1e-5)); frames = (samples - 256) // 256 + 1."""
    waveform = audio if audio.dim() == 2 else audio.reshape(1, -1)
    pad = (N_FFT - HOP_LENGTH) // 2
    if waveform.shape[-1] <= pad:
        raise InvalidInputError(f"audio of {waveform.shape[-1]} samples is too short for a speaker embedding")
    waveform = F.pad(waveform[:, None], (pad, pad), mode="reflect")[:, 0]
    window = torch.hann_window(WIN_LENGTH, dtype=waveform.dtype, device=waveform.device)
    spec = torch.stft(
        waveform,
        N_FFT,
        hop_length=HOP_LENGTH,
        win_length=WIN_LENGTH,
        window=window,
        center=False,
        normalized=False,
        onesided=True,
        return_complex=True,
    )
    magnitude = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + MAGNITUDE_EPS)
    filters = mel_filterbank().to(device=waveform.device, dtype=waveform.dtype)
    return torch.log(torch.clamp(filters @ magnitude, min=LOG_FLOOR))


def _conv(in_channels: int, out_channels: int, kernel_size: int = 1, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, padding="same", padding_mode="reflect")


class TDNNLayer(nn.Module):
    """Dilated 1-D convolution (reflect "same" padding) followed by ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int):
        super().__init__()
        self.conv = _conv(in_channels, out_channels, kernel_size, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


class Res2Net(nn.Module):
    """Splits channels into `scale` groups; group 0 passes through, group i > 0 is convolved together with
    the previous group's output (hierarchical residual connections)."""

    def __init__(self, channels: int, scale: int, kernel_size: int, dilation: int):
        super().__init__()
        width = channels // scale
        self.scale = scale
        self.blocks = nn.ModuleList(TDNNLayer(width, width, kernel_size, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        groups = x.chunk(self.scale, dim=1)
        outputs = [groups[0]]
        previous: torch.Tensor | None = None
        for block, group in zip(self.blocks, groups[1:], strict=True):
            previous = block(group if previous is None else group + previous)
            outputs.append(previous)
        return torch.cat(outputs, dim=1)


class SqueezeExcitation(nn.Module):
    """Channel gates from the time-averaged features."""

    def __init__(self, channels: int, bottleneck: int):
        super().__init__()
        self.conv1 = _conv(channels, bottleneck)
        self.conv2 = _conv(bottleneck, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.conv2(F.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * gate


class SERes2NetBlock(nn.Module):
    """1x1 TDNN -> Res2Net -> 1x1 TDNN -> squeeze-excitation, plus the input."""

    def __init__(self, channels: int, scale: int, se_channels: int, kernel_size: int, dilation: int):
        super().__init__()
        self.tdnn1 = TDNNLayer(channels, channels, 1, 1)
        self.res2net_block = Res2Net(channels, scale, kernel_size, dilation)
        self.tdnn2 = TDNNLayer(channels, channels, 1, 1)
        self.se_block = SqueezeExcitation(channels, se_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


def _weighted_stats(x: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation over time under per-frame weights that sum to one: (B, C) each."""
    mean = (weights * x).sum(dim=2)
    variance = (weights * (x - mean[:, :, None]).pow(2)).sum(dim=2)
    return mean, variance.clamp(min=STATS_EPS).sqrt()


class AttentiveStatsPooling(nn.Module):
    """Channel-wise attention over time, conditioned on the utterance's global mean and std; returns the
    attention-weighted mean and std concatenated: (B, 2C)."""

    def __init__(self, channels: int, attention_channels: int):
        super().__init__()
        self.tdnn = TDNNLayer(channels * 3, attention_channels, 1, 1)
        self.conv = _conv(attention_channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Uniform weights ones / sum(ones) in the working dtype (rather than x.mean) follow the official
        # arithmetic exactly, including its rounding of the frame count in bfloat16.
        ones = torch.ones((1, 1, x.shape[2]), dtype=x.dtype, device=x.device)
        uniform = ones / ones.sum(dim=2, keepdim=True)
        mean, std = _weighted_stats(x, uniform)
        context = torch.cat([x, mean[:, :, None].expand_as(x), std[:, :, None].expand_as(x)], dim=1)
        attention = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        return torch.cat(_weighted_stats(x, attention), dim=1)


class SpeakerEncoder(nn.Module):
    """ECAPA-TDNN speaker encoder: (B, frames, mel_dim) log-mels -> (B, enc_dim) speaker embeddings."""

    def __init__(self, cfg: SpeakerEncoderConfig):
        super().__init__()
        self.cfg = cfg
        channels, kernels, dilations = cfg.enc_channels, cfg.enc_kernel_sizes, cfg.enc_dilations
        layers: list[nn.Module] = [TDNNLayer(cfg.mel_dim, channels[0], kernels[0], dilations[0])]
        for i in range(1, len(channels) - 1):
            layers.append(
                SERes2NetBlock(channels[i], cfg.enc_res2net_scale, cfg.enc_se_channels, kernels[i], dilations[i])
            )
        self.blocks = nn.ModuleList(layers)
        self.mfa = TDNNLayer(channels[-1], channels[-1], kernels[-1], dilations[-1])
        self.asp = AttentiveStatsPooling(channels[-1], cfg.enc_attention_channels)
        self.fc = _conv(channels[-1] * 2, cfg.enc_dim)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        x = mels.transpose(1, 2)
        if x.shape[2] < self.cfg.min_frames:
            raise InvalidInputError(f"audio of {x.shape[2]} mel frames is too short for a speaker embedding")
        x = self.blocks[0](x)
        block_outputs = []
        for block in self.blocks[1:]:
            x = block(x)
            block_outputs.append(x)
        x = self.mfa(torch.cat(block_outputs, dim=1))
        pooled = self.asp(x)
        return self.fc(pooled[:, :, None])[:, :, 0]

    @torch.inference_mode()
    def embed(self, audio: torch.Tensor) -> torch.Tensor:
        """(samples,) 24 kHz mono waveform -> (enc_dim,) embedding in the module's dtype.

        The mel is computed in float32 on the audio's device, then the encoder runs in the module's dtype
        on its device. Values outside [-1, 1] are accepted as they are."""
        if audio.dim() != 1:
            raise InvalidInputError(f"expected mono audio of shape (samples,), got {tuple(audio.shape)}")
        weight = self.fc.weight
        mels = log_mel_spectrogram(audio.float()[None]).transpose(1, 2)
        return self(mels.to(device=weight.device, dtype=weight.dtype))[0]
