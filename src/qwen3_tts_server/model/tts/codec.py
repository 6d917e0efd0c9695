"""The 12 Hz speech-tokenizer decoder: 16 codebooks per 80 ms frame -> 24 kHz audio (1920 samples a frame).

Split RVQ (1 semantic + 15 acoustic) -> causal conv -> sliding-window transformer -> two x2 upsampling
stages (transposed conv + ConvNeXt) -> SnakeBeta / transposed-conv blocks with dilated residual units.
Every stage is causal, so decoding a prefix of the codes gives a prefix of the audio.
Parameter names mirror `speech_tokenizer/model.safetensors` (prefix `decoder.`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import Attention, RMSNorm, Rotary, SwiGLU
from .codec_encoder import CodecEncoder
from .config import CodecDecoderConfig, CodecEncoderConfig


class CausalConv(nn.Module):
    """Stride-1 conv padded on the left only."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, dilation=dilation, groups=groups)
        self.left = (kernel - 1) * dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (self.left, 0)))


class CausalTransposedConv(nn.Module):
    """Transposed conv whose overlapping tail (kernel - stride samples) is cut from the right."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, kernel, stride=stride)
        self.trim = kernel - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(x).transpose(1, 2))
        y = self.gamma * self.pwconv2(F.gelu(self.pwconv1(y)))
        return x + y.transpose(1, 2)


class SnakeBeta(nn.Module):
    """x + 1/exp(beta) * sin^2(x * exp(alpha)), per channel (log-scale parameters)."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = torch.exp(self.alpha)[None, :, None]
        beta = torch.exp(self.beta)[None, :, None]
        return x + (1.0 / (beta + 1e-9)) * torch.sin(x * alpha).pow(2)


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.act2(self.conv1(self.act1(x))))


class UpsampleBlock(nn.Module):
    def __init__(self, cin: int, cout: int, rate: int):
        super().__init__()
        self.block = nn.ModuleList(
            [SnakeBeta(cin), CausalTransposedConv(cin, cout, 2 * rate, rate)]
            + [ResidualUnit(cout, d) for d in (1, 3, 9)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.block:
            x = layer(x)
        return x


class Codebook(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))

    def lookup(self, codes: torch.Tensor) -> torch.Tensor:
        table = self.embedding_sum / self.cluster_usage.clamp(min=1e-5)[:, None]
        return F.embedding(codes, table)


class _VQLayer(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self._codebook = Codebook(size, dim)


class _VQStack(nn.Module):
    def __init__(self, count: int, size: int, dim: int):
        super().__init__()
        self.layers = nn.ModuleList(_VQLayer(size, dim) for _ in range(count))


class ResidualQuantizer(nn.Module):
    """Sum of codebook vectors, projected to the codec width (input_proj only matters to the encoder)."""

    def __init__(self, count: int, size: int, dim: int, io_dim: int):
        super().__init__()
        self.input_proj = nn.Conv1d(io_dim, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, io_dim, 1, bias=False)
        self.vq = _VQStack(count, size, dim)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, count, T) -> (B, io_dim, T)."""
        total = sum(layer._codebook.lookup(codes[:, i]) for i, layer in enumerate(self.vq.layers))
        return self.output_proj(total.transpose(1, 2))


class SplitQuantizer(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        dim = cfg.codebook_dim // 2
        self.rvq_first = ResidualQuantizer(1, cfg.codebook_size, dim, cfg.codebook_dim)
        self.rvq_rest = ResidualQuantizer(cfg.num_quantizers - 1, cfg.codebook_size, dim, cfg.codebook_dim)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.rvq_first.decode(codes[:, :1]) + self.rvq_rest.decode(codes[:, 1:])


class LayerScale(nn.Module):
    def __init__(self, dim: int, init: float):
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class CodecTransformerLayer(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        stack = cfg.stack
        self.self_attn = Attention(stack, qk_norm=False)
        self.mlp = SwiGLU(stack.hidden_size, stack.intermediate_size)
        self.input_layernorm = RMSNorm(stack.hidden_size, stack.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(stack.hidden_size, stack.rms_norm_eps)
        self.self_attn_layer_scale = LayerScale(stack.hidden_size, cfg.layer_scale_initial_scale)
        self.mlp_layer_scale = LayerScale(stack.hidden_size, cfg.layer_scale_initial_scale)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.self_attn.project(self.input_layernorm(x), cos, sin)
        x = x + self.self_attn_layer_scale(self.self_attn.attend(q, k, v, mask))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class CodecTransformer(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        stack = cfg.stack
        self.window = cfg.sliding_window
        self.input_proj = nn.Linear(cfg.latent_dim, stack.hidden_size)
        self.output_proj = nn.Linear(stack.hidden_size, cfg.latent_dim)
        self.layers = nn.ModuleList(CodecTransformerLayer(cfg) for _ in range(stack.num_hidden_layers))
        self.norm = RMSNorm(stack.hidden_size, stack.rms_norm_eps)
        self.rotary = Rotary(stack.head_dim, stack.rope_theta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, latent) -> (B, T, latent); each frame sees itself and the window-1 frames before it."""
        t = x.shape[1]
        x = self.input_proj(x)
        positions = torch.arange(t, device=x.device)
        cos, sin = self.rotary.span(0, t, x.dtype)
        offset = positions[:, None] - positions[None, :]
        mask = (offset >= 0) & (offset < self.window)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output_proj(self.norm(x))


class CodecDecoder(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.quantizer = SplitQuantizer(cfg)
        self.pre_conv = CausalConv(cfg.codebook_dim, cfg.latent_dim, 3)
        self.pre_transformer = CodecTransformer(cfg)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalTransposedConv(cfg.latent_dim, cfg.latent_dim, r, r), ConvNeXtBlock(cfg.latent_dim)])
            for r in cfg.upsampling_ratios
        )
        stages: list[nn.Module] = [CausalConv(cfg.latent_dim, cfg.decoder_dim, 7)]
        for i, rate in enumerate(cfg.upsample_rates):
            stages.append(UpsampleBlock(cfg.decoder_dim // 2**i, cfg.decoder_dim // 2 ** (i + 1), rate))
        out_dim = cfg.decoder_dim // 2 ** len(cfg.upsample_rates)
        stages += [SnakeBeta(out_dim), CausalConv(out_dim, 1, 7)]
        self.decoder = nn.ModuleList(stages)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, num_quantizers, T) int -> audio (B, T * samples_per_frame) in [-1, 1]."""
        hidden = self.pre_conv(self.quantizer.decode(codes))
        hidden = self.pre_transformer(hidden.transpose(1, 2)).transpose(1, 2)
        for transposed, convnext in self.upsample:
            hidden = convnext(transposed(hidden))
        for stage in self.decoder:
            hidden = stage(hidden)
        return hidden.clamp(-1, 1)[:, 0]


class SpeechTokenizer(nn.Module):
    """The `speech_tokenizer/` checkpoint: the decoder speaks; the encoder (audio -> codes) is loaded only
    when given its config, for voice cloning."""

    def __init__(self, cfg: CodecDecoderConfig, encoder_cfg: CodecEncoderConfig | None = None):
        super().__init__()
        self.decoder = CodecDecoder(cfg)
        self.encoder = CodecEncoder(encoder_cfg) if encoder_cfg is not None else None
