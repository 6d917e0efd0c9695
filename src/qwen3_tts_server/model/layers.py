"""Transformer building blocks shared by the talker, the code predictor and the codec's pre-transformer.

Parameter names follow the official checkpoint layout so that `load_state_dict` takes the files as they are.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import DecoderStackConfig


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32 whatever the weight dtype."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


class Rotary(nn.Module):
    """1-D rotary position tables, computed in float32.

    The talker's interleaved multimodal RoPE gives every section (temporal, height, width) the same
    position for text and codec tokens, which is all a TTS sequence holds; it therefore equals this 1-D
    RoPE exactly, and no section bookkeeping is needed.
    """

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta
        self.register_buffer("inv_freq", self._inv_freq(torch.device("cpu")), persistent=False)

    def _inv_freq(self, device: torch.device) -> torch.Tensor:
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=device).float() / self.head_dim
        return 1.0 / (self.theta**exponents)

    def reset(self, device: torch.device) -> None:
        """Recompute the table on `device` (after loading weights onto a meta-initialised module)."""
        self.inv_freq = self._inv_freq(device)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: (B, T) int -> cos, sin: (B, 1, T, head_dim)."""
        freqs = positions[..., None].float() * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


class KVCache:
    """Keys and values of a batch of rows, each row with its own length.

    Storage per layer is (rows, kv_heads, capacity, head_dim); it grows by doubling, so no length limit
    is baked in. Rows are written independently: a prefill fills one row, a decode step appends one
    token to each row of a set at that row's own position.
    """

    def __init__(self, layers: int, rows: int, kv_heads: int, head_dim: int, capacity: int,
                 dtype: torch.dtype, device: torch.device):
        shape = (layers, rows, kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = torch.zeros(rows, dtype=torch.long, device=device)

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def ensure_capacity(self, needed: int) -> None:
        if needed <= self.capacity:
            return
        new_capacity = self.capacity
        while new_capacity < needed:
            new_capacity *= 2
        pad = new_capacity - self.capacity
        self.k = F.pad(self.k, (0, 0, 0, pad))
        self.v = F.pad(self.v, (0, 0, 0, pad))


class Attention(nn.Module):
    """Grouped-query attention with optional q/k RMSNorm over the head dimension."""

    def __init__(self, cfg: DecoderStackConfig, qk_norm: bool):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=cfg.attention_bias)
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = nn.Identity()

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x: (B, T, hidden) -> q (B, H, T, D), k and v (B, Hkv, T, D), RoPE applied."""
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """mask: boolean, True where attention is allowed, broadcastable to (B, H, Tq, Tk)."""
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=self.head_dim**-0.5, enable_gqa=self.heads != self.kv_heads
        )
        b, _, t, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm attention + SwiGLU block, as used by the talker and the code predictor."""

    def __init__(self, cfg: DecoderStackConfig):
        super().__init__()
        self.self_attn = Attention(cfg, qk_norm=True)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def mlp_block(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderStack(nn.Module):
    """A stack of decoder layers with a final norm, run either over a whole sequence (prefill) or one
    token per row against a `KVCache`."""

    def __init__(self, cfg: DecoderStackConfig):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta)

    def new_cache(self, rows: int, capacity: int, dtype: torch.dtype, device: torch.device) -> KVCache:
        return KVCache(len(self.layers), rows, self.cfg.num_key_value_heads, self.cfg.head_dim, capacity,
                       dtype, device)

    def prefill(self, x: torch.Tensor, cache: KVCache, rows: torch.Tensor) -> torch.Tensor:
        """Run whole prompts x (B, T, hidden) of equal length causally from position 0, storing their
        keys/values in cache rows `rows` (B,)."""
        t = x.shape[1]
        cache.ensure_capacity(t)
        positions = torch.arange(t, device=x.device)[None]
        cos, sin = self.rotary(positions, x.dtype)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        for i, layer in enumerate(self.layers):
            q, k, v = layer.self_attn.project(layer.input_layernorm(x), cos, sin)
            cache.k[i, rows, :, :t] = k
            cache.v[i, rows, :, :t] = v
            x = x + layer.self_attn.attend(q, k, v, mask)
            x = layer.mlp_block(x)
        cache.lengths[rows] = t
        return self.norm(x)

    def decode(self, x: torch.Tensor, cache: KVCache, rows: torch.Tensor) -> torch.Tensor:
        """Append one token per row: x (B, 1, hidden) for cache rows `rows` (B,), each at its own position."""
        positions = cache.lengths[rows]
        span = int(positions.max()) + 1
        cache.ensure_capacity(span)
        cos, sin = self.rotary(positions[:, None], x.dtype)
        mask = (torch.arange(span, device=x.device)[None] <= positions[:, None])[:, None, None, :]
        for i, layer in enumerate(self.layers):
            q, k, v = layer.self_attn.project(layer.input_layernorm(x), cos, sin)
            cache.k[i, rows, :, positions] = k[:, :, 0]
            cache.v[i, rows, :, positions] = v[:, :, 0]
            keys = cache.k[i, rows, :, :span]
            values = cache.v[i, rows, :, :span]
            x = x + layer.self_attn.attend(q, keys, values, mask)
            x = layer.mlp_block(x)
        cache.lengths[rows] = positions + 1
        return self.norm(x)
