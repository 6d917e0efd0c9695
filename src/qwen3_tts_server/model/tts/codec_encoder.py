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

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InvalidInputError
from .config import ENCODER_ACTIVATIONS, CodecEncoderConfig

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}
assert set(_ACTIVATIONS) == set(ENCODER_ACTIVATIONS)


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
