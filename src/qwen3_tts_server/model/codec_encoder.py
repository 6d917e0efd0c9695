"""The 12 Hz speech-tokenizer encoder: 24 kHz mono audio -> 16 codebook indices per 80 ms frame.

It is a Mimi encoder (SEANet convolutions -> causal transformer -> stride-2 downsampling conv -> split
residual vector quantizer) as transformers' `MimiModel.encode` runs it, which the official 12 Hz tokenizer
calls before keeping the first `encoder_valid_num_quantizers` codebooks.
Parameter and buffer names mirror the `encoder.*` entries of `speech_tokenizer/model.safetensors`.

Two transformers behaviours are kept on purpose:
- `sliding_window` is parsed but not applied: Mimi's eager and SDPA attention get a plain causal mask
  (`create_causal_mask`), so every frame sees all earlier frames.
- each convolution's right padding is worked out in float32 tensor arithmetic, as transformers does, so
  that even very long inputs are padded identically.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import CheckpointError, InvalidInputError, UnsupportedModelError

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}
_PAD_MODES = ("constant", "replicate", "reflect")
_WHERE = "speech_tokenizer encoder_config"

# MimiConfig's defaults (transformers configuration_mimi.py). None means "derived from other fields".
MIMI_DEFAULTS: dict[str, Any] = {
    "sampling_rate": 24000,
    "frame_rate": None,
    "audio_channels": 1,
    "hidden_size": 512,
    "num_filters": 64,
    "num_residual_layers": 1,
    "upsampling_ratios": None,
    "kernel_size": 7,
    "last_kernel_size": 3,
    "residual_kernel_size": 3,
    "dilation_growth_rate": 2,
    "use_causal_conv": True,
    "pad_mode": "constant",
    "compress": 2,
    "codebook_size": 2048,
    "codebook_dim": 256,
    "num_quantizers": 32,
    "use_conv_shortcut": False,
    "vector_quantization_hidden_dimension": 256,
    "num_semantic_quantizers": 1,
    "num_hidden_layers": 8,
    "intermediate_size": 2048,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": None,
    "hidden_act": "gelu",
    "norm_eps": 1e-5,
    "use_streaming": False,
    "rope_theta": 10000.0,
    "sliding_window": 250,
    "attention_bias": False,
}


def _field(section: dict[str, Any], key: str, kind: type, where: str = _WHERE) -> Any:
    value = section.get(key, MIMI_DEFAULTS.get(key))
    try:
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind is int and (isinstance(value, bool) or float(value) != int(value)):
            raise TypeError
        return kind(value)
    except (TypeError, ValueError):
        raise CheckpointError(f"{where}: field {key!r} has an invalid value {value!r}") from None


@dataclass(frozen=True)
class CodecEncoderConfig:
    """speech_tokenizer/config.json, encoder part (a transformers MimiConfig plus the 12 Hz wrapper's fields)."""

    sampling_rate: int
    hidden_size: int
    num_filters: int
    num_residual_layers: int
    upsampling_ratios: tuple[int, ...]
    kernel_size: int
    last_kernel_size: int
    residual_kernel_size: int
    dilation_growth_rate: int
    use_causal_conv: bool
    pad_mode: str
    compress: int
    use_conv_shortcut: bool
    codebook_size: int
    codebook_dim: int
    num_quantizers: int
    num_semantic_quantizers: int
    vector_quantization_hidden_dimension: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_act: str
    norm_eps: float
    rope_theta: float
    sliding_window: int | None  # parsed for completeness; transformers' eager/SDPA Mimi attention ignores it
    attention_bias: bool
    frame_rate: float
    valid_num_quantizers: int
    encode_downsample_rate: int
    input_sample_rate: int

    @property
    def hop_length(self) -> int:
        """Samples per frame of the SEANet convolutions (before the stride-2 downsampling)."""
        return math.prod(self.upsampling_ratios)

    @property
    def encodec_frame_rate(self) -> int:
        return math.ceil(self.sampling_rate / self.hop_length)

    @property
    def downsample_kernel(self) -> int:
        return 2 * int(self.encodec_frame_rate / self.frame_rate)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> CodecEncoderConfig:
        """Read the whole speech_tokenizer/config.json dict. Only `encoder_config` is required; absent fields
        take MimiConfig's defaults, absent top-level fields those of the official tokenizer config."""
        if "encoder_config" not in raw:
            raise CheckpointError("speech_tokenizer/config.json is missing the required field 'encoder_config'")
        section = raw["encoder_config"]
        if not isinstance(section, dict):
            raise CheckpointError("speech_tokenizer/config.json: 'encoder_config' must be an object")
        _reject_unsupported(section)

        hidden = _field(section, "hidden_size", int)
        heads = _field(section, "num_attention_heads", int)
        ratios = section.get("upsampling_ratios") or [8, 6, 5, 4]
        try:
            upsampling_ratios = tuple(int(r) for r in ratios)
        except (TypeError, ValueError):
            raise CheckpointError(f"{_WHERE}: field 'upsampling_ratios' has an invalid value {ratios!r}") from None
        codebook_dim = section.get("codebook_dim", MIMI_DEFAULTS["codebook_dim"])
        head_dim = section.get("head_dim")
        sliding_window = section.get("sliding_window", MIMI_DEFAULTS["sliding_window"])
        cfg = cls(
            sampling_rate=_field(section, "sampling_rate", int),
            hidden_size=hidden,
            num_filters=_field(section, "num_filters", int),
            num_residual_layers=_field(section, "num_residual_layers", int),
            upsampling_ratios=upsampling_ratios,
            kernel_size=_field(section, "kernel_size", int),
            last_kernel_size=_field(section, "last_kernel_size", int),
            residual_kernel_size=_field(section, "residual_kernel_size", int),
            dilation_growth_rate=_field(section, "dilation_growth_rate", int),
            use_causal_conv=_field(section, "use_causal_conv", bool),
            pad_mode=str(section.get("pad_mode", "constant")),
            compress=_field(section, "compress", int),
            use_conv_shortcut=_field(section, "use_conv_shortcut", bool),
            codebook_size=_field(section, "codebook_size", int),
            codebook_dim=hidden if codebook_dim is None else _field(section, "codebook_dim", int),
            num_quantizers=_field(section, "num_quantizers", int),
            num_semantic_quantizers=_field(section, "num_semantic_quantizers", int),
            vector_quantization_hidden_dimension=_field(section, "vector_quantization_hidden_dimension", int),
            num_hidden_layers=_field(section, "num_hidden_layers", int),
            intermediate_size=_field(section, "intermediate_size", int),
            num_attention_heads=heads,
            num_key_value_heads=_field(section, "num_key_value_heads", int),
            head_dim=_field(section, "head_dim", int) if head_dim else hidden // heads,
            hidden_act=str(section.get("hidden_act", "gelu")),
            norm_eps=_field(section, "norm_eps", float),
            rope_theta=_field(section, "rope_theta", float),
            sliding_window=None if sliding_window is None else _field(section, "sliding_window", int),
            attention_bias=_field(section, "attention_bias", bool),
            frame_rate=_frame_rate(section, upsampling_ratios),
            valid_num_quantizers=_top_level(raw, "encoder_valid_num_quantizers"),
            encode_downsample_rate=_top_level(raw, "encode_downsample_rate"),
            input_sample_rate=_top_level(raw, "input_sample_rate"),
        )
        cfg._validate()
        return cfg

    def _validate(self) -> None:
        if self.pad_mode not in _PAD_MODES:
            raise UnsupportedModelError(f"{_WHERE}: pad_mode {self.pad_mode!r} is not supported")
        if self.hidden_act not in _ACTIVATIONS:
            raise UnsupportedModelError(f"{_WHERE}: hidden_act {self.hidden_act!r} is not supported")
        if self.frame_rate == self.encodec_frame_rate or self.downsample_kernel < 2:
            # transformers builds no downsampling conv for an equal rate, and its encode then fails.
            raise UnsupportedModelError(
                f"{_WHERE}: frame_rate {self.frame_rate} with convolutions at {self.encodec_frame_rate} Hz "
                "is not supported"
            )
        if self.codebook_size <= 0 or self.codebook_size & (self.codebook_size - 1):
            raise CheckpointError(f"{_WHERE}: codebook_size {self.codebook_size} must be a power of 2")
        if not 0 < self.num_semantic_quantizers < self.num_quantizers:
            raise CheckpointError(f"{_WHERE}: num_semantic_quantizers must be in [1, num_quantizers)")
        if self.codebook_dim != self.vector_quantization_hidden_dimension:
            raise CheckpointError(f"{_WHERE}: codebook_dim must equal vector_quantization_hidden_dimension")
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise CheckpointError(f"{_WHERE}: attention heads do not divide hidden_size / each other")
        if self.head_dim % 2:
            raise CheckpointError(f"{_WHERE}: head_dim must be even for rotary embeddings")
        if not 0 < self.valid_num_quantizers <= self.num_quantizers:
            raise CheckpointError(
                f"speech_tokenizer/config.json: encoder_valid_num_quantizers {self.valid_num_quantizers} "
                f"must be in [1, {self.num_quantizers}]"
            )
        if self.encode_downsample_rate != 2 * self.hop_length:
            raise CheckpointError(
                f"speech_tokenizer/config.json: encode_downsample_rate {self.encode_downsample_rate} does not "
                f"match the encoder's {2 * self.hop_length} samples per frame"
            )


# Defaults of the official Qwen3TTSTokenizerV2Config for the top-level fields the encoder reads.
_TOP_LEVEL_DEFAULTS = {"encoder_valid_num_quantizers": 16, "encode_downsample_rate": 1920, "input_sample_rate": 24000}


def _top_level(raw: dict[str, Any], key: str) -> int:
    return _field({key: raw.get(key, _TOP_LEVEL_DEFAULTS[key])}, key, int, "speech_tokenizer/config.json")


def _reject_unsupported(section: dict[str, Any]) -> None:
    def unsupported(what: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"{_WHERE}: {what} is not supported")

    if section.get("audio_channels", 1) != 1:
        raise unsupported(f"audio_channels {section['audio_channels']!r}")
    if section.get("use_streaming", False):
        raise unsupported("use_streaming")
    if isinstance(section.get("residual_kernel_size"), (list, tuple)):
        raise unsupported("a list of residual_kernel_size")
    rope_scaling = section.get("rope_scaling") or {}
    if rope_scaling.get("rope_type", rope_scaling.get("type", "default")) != "default":
        raise unsupported(f"rope_scaling {rope_scaling!r}")
    if section.get("partial_rotary_factor", 1.0) != 1.0:
        raise unsupported("partial_rotary_factor")


def _frame_rate(section: dict[str, Any], ratios: tuple[int, ...]) -> float:
    # MimiConfig keeps an explicit frame_rate in `_frame_rate`; a serialised config may carry that key,
    # which PretrainedConfig sets after __init__, so it wins over `frame_rate`.
    value = section["_frame_rate"] if "_frame_rate" in section else section.get("frame_rate")
    if value is None:
        sampling_rate = _field(section, "sampling_rate", int)
        return sampling_rate / (math.prod(ratios) * 2)
    return _field({"frame_rate": value}, "frame_rate", float)


class SeanetConv(nn.Module):
    """Conv1d padded as MimiConv1d: kernel - stride on the left (causal) or split around the input,
    plus right padding that completes the last stride."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int,
        stride: int = 1,
        dilation: int = 1,
        bias: bool = True,
        causal: bool = True,
        pad_mode: str = "constant",
    ):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride, dilation=dilation, bias=bias)
        self.stride = stride
        self.effective_kernel = (kernel - 1) * dilation + 1
        self.padding_total = self.effective_kernel - stride
        self.causal = causal
        self.pad_mode = pad_mode

    def extra_padding(self, length: int) -> int:
        # transformers divides int64 tensors here, i.e. in float32; the same ops keep long inputs identical.
        kernel = torch.tensor(self.effective_kernel, dtype=torch.int64)
        stride = torch.tensor(self.stride, dtype=torch.int64)
        total = kernel - stride
        frames = torch.ceil((length - kernel + total) / stride + 1).to(torch.int64) - 1
        return int(frames * stride + kernel - total) - length

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        extra = self.extra_padding(x.shape[-1])
        if self.causal:
            left, right = self.padding_total, extra
        else:
            left = self.padding_total - self.padding_total // 2
            right = self.padding_total // 2 + extra
        return self.conv(_pad(x, left, right, self.pad_mode))


def _pad(x: torch.Tensor, left: int, right: int, mode: str) -> torch.Tensor:
    if mode != "reflect":
        return F.pad(x, (left, right), mode)
    # Reflection needs more samples than the padding: zero-extend first, then drop that extension.
    length = x.shape[-1]
    extension = max(0, max(left, right) - length + 1)
    padded = F.pad(F.pad(x, (0, extension)), (left, right), mode)
    return padded[..., : padded.shape[-1] - extension]


class ResnetBlock(nn.Module):
    """ELU -> conv(k, dilation) -> ELU -> conv(1), added to the input (or to a 1x1 conv of it)."""

    def __init__(self, cfg: CodecEncoderConfig, dim: int, dilation: int):
        super().__init__()
        hidden = dim // cfg.compress
        conv = {"causal": cfg.use_causal_conv, "pad_mode": cfg.pad_mode}
        self.block = nn.ModuleList(
            [
                nn.ELU(),
                SeanetConv(dim, hidden, cfg.residual_kernel_size, dilation=dilation, **conv),
                nn.ELU(),
                SeanetConv(hidden, dim, 1, **conv),
            ]
        )
        self.shortcut: nn.Module = SeanetConv(dim, dim, 1, **conv) if cfg.use_conv_shortcut else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        for layer in self.block:
            x = layer(x)
        return self.shortcut(residual) + x


class SeanetEncoder(nn.Module):
    """audio (B, 1, samples) -> (B, hidden, ceil(samples / hop)); the ELUs hold list slots so that the
    convolutions keep the checkpoint's indices."""

    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        conv = {"causal": cfg.use_causal_conv, "pad_mode": cfg.pad_mode}
        layers: list[nn.Module] = [SeanetConv(1, cfg.num_filters, cfg.kernel_size, **conv)]
        width = cfg.num_filters
        for ratio in reversed(cfg.upsampling_ratios):
            for j in range(cfg.num_residual_layers):
                layers.append(ResnetBlock(cfg, width, cfg.dilation_growth_rate**j))
            layers += [nn.ELU(), SeanetConv(width, width * 2, ratio * 2, stride=ratio, **conv)]
            width *= 2
        layers += [nn.ELU(), SeanetConv(width, cfg.hidden_size, cfg.last_kernel_size, **conv)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class LayerScale(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), 0.01))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class SelfAttention(nn.Module):
    """Causal multi-head attention with RoPE, run through SDPA as transformers' default CPU path runs it."""

    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=bias)

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, heads, self.head_dim).transpose(1, 2)

    def _repeat(self, x: torch.Tensor) -> torch.Tensor:
        groups = self.heads // self.kv_heads
        if groups == 1:
            return x
        b, h, t, d = x.shape
        return x[:, :, None].expand(b, h, groups, t, d).reshape(b, h * groups, t, d)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self._split(self.q_proj(x), self.heads)
        k = self._split(self.k_proj(x), self.kv_heads)
        v = self._split(self.v_proj(x), self.kv_heads)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        # With no padding mask transformers hands SDPA is_causal instead of a mask (one frame: neither).
        out = F.scaled_dot_product_attention(q, self._repeat(k), self._repeat(v), is_causal=t > 1)
        return self.o_proj(out.transpose(1, 2).contiguous().view(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.activation = _ACTIVATIONS[cfg.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation(self.fc1(x)))


class TransformerLayer(nn.Module):
    """Pre-LayerNorm attention and MLP blocks, each scaled per channel before the residual add."""

    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        self.self_attn = SelfAttention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.self_attn_layer_scale = LayerScale(cfg.hidden_size)
        self.mlp_layer_scale = LayerScale(cfg.hidden_size)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class Transformer(nn.Module):
    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        self.layers = nn.ModuleList(TransformerLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.head_dim = cfg.head_dim
        self.theta = cfg.rope_theta

    def rotary(self, length: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin: (1, 1, length, head_dim), computed in float32 (an outer product done as a matmul)."""
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=device).float() / self.head_dim
        inv_freq = 1.0 / (self.theta**exponents)
        positions = torch.arange(length, device=device).float()
        freqs = (inv_freq[None, :, None] @ positions[None, None, :]).transpose(1, 2)
        table = torch.cat((freqs, freqs), dim=-1)
        return table.cos().to(dtype)[:, None], table.sin().to(dtype)[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, hidden) -> (B, T, hidden)."""
        cos, sin = self.rotary(x.shape[1], x.device, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


class EuclideanCodebook(nn.Module):
    """Codebook vectors kept as running sums and usage counts (`embed_sum / usage`), searched by L2 distance."""

    def __init__(self, size: int, dim: int):
        super().__init__()
        self.register_buffer("initialized", torch.tensor([True], dtype=torch.float32))
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embed_sum", torch.zeros(size, dim))

    def embed(self) -> torch.Tensor:
        return self.embed_sum / self.cluster_usage.clamp(min=1e-5)[:, None]

    def nearest(self, x: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
        """x (B, D, T) -> indices (B, T); one cdist over all B*T vectors, as transformers batches them."""
        b, d, t = x.shape
        flat = x.permute(0, 2, 1).reshape(-1, d)
        dists = torch.cdist(flat[None].float(), embed[None].float(), p=2)[0]
        return dists.argmin(dim=-1).view(b, t)


class _VQLayer(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self.codebook = EuclideanCodebook(size, dim)


class ResidualVectorQuantizer(nn.Module):
    def __init__(self, cfg: CodecEncoderConfig, count: int):
        super().__init__()
        dim = cfg.vector_quantization_hidden_dimension
        self.layers = nn.ModuleList(_VQLayer(cfg.codebook_size, cfg.codebook_dim) for _ in range(count))
        self.input_proj: nn.Conv1d | None = None
        self.output_proj: nn.Conv1d | None = None  # decoding only; held so that the checkpoint loads
        if dim != cfg.hidden_size:
            self.input_proj = nn.Conv1d(cfg.hidden_size, dim, 1, bias=False)
            self.output_proj = nn.Conv1d(dim, cfg.hidden_size, 1, bias=False)

    def encode(self, x: torch.Tensor, count: int) -> list[torch.Tensor]:
        """x (B, hidden, T) -> `count` index tensors (B, T), each coding what the previous ones left."""
        residual = self.input_proj(x) if self.input_proj is not None else x
        codes = []
        for layer in self.layers[:count]:
            embed = layer.codebook.embed()
            indices = layer.codebook.nearest(residual, embed)
            residual = residual - F.embedding(indices, embed).permute(0, 2, 1)
            codes.append(indices)
        return codes


class SplitResidualVectorQuantizer(nn.Module):
    """Semantic codebooks first, then acoustic ones; both quantize the same input independently."""

    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        self.num_semantic = cfg.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = ResidualVectorQuantizer(cfg, cfg.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = ResidualVectorQuantizer(
            cfg, cfg.num_quantizers - cfg.num_semantic_quantizers
        )

    def encode(self, x: torch.Tensor, count: int) -> torch.Tensor:
        """x (B, hidden, T) -> (B, count, T); later codebooks never change earlier ones, so only `count` run."""
        codes = self.semantic_residual_vector_quantizer.encode(x, min(count, self.num_semantic))
        if count > self.num_semantic:
            codes += self.acoustic_residual_vector_quantizer.encode(x, count - self.num_semantic)
        return torch.stack(codes, dim=1)


class CodecEncoder(nn.Module):
    """The speech tokenizer's encoder; `state_dict()` keys are the checkpoint's `encoder.*` keys unprefixed."""

    def __init__(self, cfg: CodecEncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = SeanetEncoder(cfg)
        self.encoder_transformer = Transformer(cfg)
        self.downsample = SeanetConv(
            cfg.hidden_size,
            cfg.hidden_size,
            cfg.downsample_kernel,
            stride=2,
            bias=False,
            causal=cfg.use_causal_conv,
            pad_mode="replicate",
        )
        self.quantizer = SplitResidualVectorQuantizer(cfg)

    def codes(self, audio: torch.Tensor) -> torch.Tensor:
        """audio (B, samples) -> codes (B, valid_num_quantizers, ceil(samples / encode_downsample_rate))."""
        hidden = self.encoder(audio[:, None])
        hidden = self.encoder_transformer(hidden.transpose(1, 2)).transpose(1, 2)
        hidden = self.downsample(hidden)
        return self.quantizer.encode(hidden, self.cfg.valid_num_quantizers)

    @torch.inference_mode()
    def encode(self, audio: torch.Tensor, lengths: list[int] | None = None) -> list[torch.Tensor]:
        """audio (B, samples) float 24 kHz mono, shorter items zero-padded on the right; `lengths` gives each
        item's valid samples (default: all). Returns per item a (frames, valid_num_quantizers) int64 tensor,
        frames = ceil(length / encode_downsample_rate)."""
        if audio.dim() != 2:
            raise InvalidInputError(f"audio must be (batch, samples), got shape {tuple(audio.shape)}")
        batch, samples = audio.shape
        if lengths is None:
            lengths = [samples] * batch
        if len(lengths) != batch or any(not 0 <= n <= samples for n in lengths):
            raise InvalidInputError(f"lengths {lengths} do not fit audio of shape {tuple(audio.shape)}")
        rate, width = self.cfg.encode_downsample_rate, self.cfg.valid_num_quantizers
        if batch == 0 or samples == 0:
            return [torch.zeros(0, width, dtype=torch.int64) for _ in range(batch)]
        weight = self.encoder.layers[0].conv.weight
        codes = self.codes(audio.to(device=weight.device, dtype=weight.dtype))
        return [item[:, : -(-n // rate)].T.contiguous() for item, n in zip(codes, lengths, strict=True)]
