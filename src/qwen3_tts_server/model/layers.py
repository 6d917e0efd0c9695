"""Transformer building blocks shared by the talker, the code predictor, the codec's pre-transformer (model/tts/)
and the ASR text decoder (model/asr/).

Parameter names follow the official checkpoint layout so that `load_state_dict` takes the files as they are.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from .decoder_config import DecoderStackConfig


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32 whatever the weight dtype."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return self.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)


class Embedding(nn.Embedding):
    """An embedding table whose lookups come out in `output_dtype` (the model's), whatever dtype the table is kept
    in: a table kept as the checkpoint stores it (bfloat16) takes half the memory of a float32 one, and its rows
    upcast on lookup are exactly the rows a float32 load would hold."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__(num_embeddings, embedding_dim)
        self.output_dtype: torch.dtype | None = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = super().forward(ids)
        return rows if self.output_dtype is None else rows.to(self.output_dtype)


class Rotary(nn.Module):
    """1-D rotary position tables, computed in float32 and cached for the positions seen so far.

    The talker's interleaved multimodal RoPE gives every section (temporal, height, width) the same
    position for text and codec tokens, which is all a TTS sequence holds; it therefore equals this 1-D
    RoPE exactly, and no section bookkeeping is needed.
    """

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta
        self.reset(torch.device("cpu"))

    def reset(self, device: torch.device) -> None:
        """Start the tables on `device` (after loading weights onto a meta-initialised module)."""
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=device).float() / self.head_dim
        self.inv_freq = 1.0 / (self.theta**exponents)
        self._tables: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}

    def table(self, length: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin for positions [0, >= length): (positions, head_dim), grown by doubling.
        The sine's first half is negated so that rotating is `x * cos + x.roll(half) * sin`."""
        cached = self._tables.get(dtype)
        if cached is None or cached[0].shape[0] < length:
            size = max(64, 1 << (length - 1).bit_length())
            freqs = torch.arange(size, device=self.inv_freq.device).float()[:, None] * self.inv_freq
            cos, sin = freqs.cos().to(dtype), freqs.sin().to(dtype)
            cached = self._tables[dtype] = (torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1))
        return cached

    def addresses(self) -> tuple[int, ...]:
        """Where the tables are (they move when they grow)."""
        return tuple(table.data_ptr() for pair in self._tables.values() for table in pair)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: (B, T) int -> cos, sin: (B, 1, T, head_dim)."""
        return self.at(positions, int(positions.max()) + 1, dtype)

    def at(self, positions: torch.Tensor, bound: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """As `forward`, with every position known to be below `bound` (no read from the device)."""
        cos, sin = self.table(bound, dtype)
        return cos[positions][:, None], sin[positions][:, None]

    def span(self, start: int, stop: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin for the positions [start, stop) shared by every row: (1, 1, stop - start, head_dim)."""
        cos, sin = self.table(stop, dtype)
        return cos[None, None, start:stop], sin[None, None, start:stop]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin, with rotate_half(x) * sin == roll(x, half) * signed_sin exactly."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin


class KVCache:
    """Keys and values of a batch of rows, each row with its own length.

    Storage per layer is (rows, kv_heads, capacity, head_dim); it grows by doubling, so no length limit
    is baked in. Rows are written independently: a prefill fills one row, a decode step appends one
    token to each row of a set at that row's own position. Each row's length is kept twice: on the device
    (`length`, what a step reads, so that a step needs no positions from the host) and on the host
    (`lengths`, what sizes a step's attention span without a read from the device).
    """

    def __init__(
        self,
        layers: int,
        rows: int,
        kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device,
    ):
        shape = (layers, rows, kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = torch.zeros(rows, dtype=torch.long, device=device)
        self.lengths = [0] * rows

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

    def copy_row(self, source: KVCache, source_row: int, row: int, length: int) -> None:
        """Row `row` becomes the first `length` positions of `source`'s row `source_row` (a cached prompt)."""
        self.ensure_capacity(length)
        self.k[:, row, :, :length] = source.k[:, source_row, :, :length]
        self.v[:, row, :, :length] = source.v[:, source_row, :, :length]
        self.length[row] = length
        self.lengths[row] = length

    def cut(self, row: int, length: int) -> None:
        """Row `row` keeps its first `length` positions; what follows is written over."""
        self.length[row] = length
        self.lengths[row] = length

    def row_index(self, rows: slice | torch.Tensor) -> torch.Tensor:
        """`rows` (indices, or a slice) as a tensor of row indices."""
        if isinstance(rows, torch.Tensor):
            return rows
        return torch.arange(self.length.shape[0], device=self.length.device)[rows]

    def advance(self, rows: slice | torch.Tensor, running: torch.Tensor, host_rows: list[int]) -> None:
        """After a decode step over `rows`: the running ones (mask (B,)), also listed in `host_rows`, grew by one."""
        self.length[rows] += running
        for row in host_rows:
            self.lengths[row] += 1


class Attention(nn.Module):
    """Grouped-query attention with optional q/k RMSNorm over the head dimension.

    The checkpoint's separate q/k/v projections are fused into one matrix on first use (`fuse`): one
    matmul instead of three per token, which is what bounds small-batch decoding.
    """

    def __init__(self, cfg: DecoderStackConfig, qk_norm: bool):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=cfg.attention_bias)
        self.qkv_proj: nn.Linear | None = None
        self.qk_norm_weight: torch.Tensor | None = None  # (H + Hkv, D): q_norm's weight per q head, then k_norm's
        self.rotary_float32 = False  # q/k norm and rotation in float32 whatever the weights (`DecoderStack`)
        self.eps = cfg.rms_norm_eps
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def fuse(self) -> None:
        self.qkv_proj = _fused_linear(self.q_proj, self.k_proj, self.v_proj)
        del self.q_proj, self.k_proj, self.v_proj
        if hasattr(self, "q_norm"):
            q_w, k_w = self.q_norm.weight.detach(), self.k_norm.weight.detach()
            self.qk_norm_weight = torch.cat((q_w.expand(self.heads, -1), k_w.expand(self.kv_heads, -1)))
            del self.q_norm, self.k_norm

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x: (B, T, hidden) -> q (B, H, T, D), k and v (B, Hkv, T, D); q/k normed per head, RoPE applied.
        Queries and keys go through the norm and the rotation together."""
        if self.qkv_proj is None:
            self.fuse()
        b, t, _ = x.shape
        qkv = self.qkv_proj(x).view(b, t, self.heads + 2 * self.kv_heads, self.head_dim)
        qk, v = qkv.split((self.heads + self.kv_heads, self.kv_heads), dim=2)
        if self.rotary_float32:
            qk = qk.float()
            if self.qk_norm_weight is not None:
                qk = self.qk_norm_weight.float() * F.rms_norm(qk, (self.head_dim,), eps=self.eps)
            qk = apply_rotary(qk.transpose(1, 2), cos, sin).to(v.dtype)
        else:
            if self.qk_norm_weight is not None:
                qk = self.qk_norm_weight * F.rms_norm(qk.float(), (self.head_dim,), eps=self.eps).to(qk.dtype)
            qk = apply_rotary(qk.transpose(1, 2), cos, sin)
        q, k = qk.split((self.heads, self.kv_heads), dim=1)
        return q, k, v.transpose(1, 2)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """mask: boolean, True where attention is allowed, broadcastable to (B, H, Tq, Tk)."""
        return self.o_proj(self.mix(q, k, v, mask))

    def mix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The heads' attention outputs side by side, (B, T, H * D): `attend` before the output projection."""
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=self.head_dim**-0.5, enable_gqa=self.heads != self.kv_heads
        )
        b, _, t, _ = out.shape
        return out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)); gate and up are fused into one matmul on first use."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.gate_up_proj: nn.Linear | None = None

    def fuse(self) -> None:
        self.gate_up_proj = _fused_linear(self.gate_proj, self.up_proj)
        del self.gate_proj, self.up_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_proj is None:
            self.fuse()
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate, inplace=True).mul_(up))


def _fused_linear(*parts: nn.Linear) -> nn.Linear:
    weight = torch.cat([p.weight.detach() for p in parts])
    # Made on the meta device: no random initialisation of weights replaced at once (on CUDA it would also draw
    # from the generator a failed graph capture can leave unusable).
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=parts[0].bias is not None, device="meta")
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if parts[0].bias is not None:
        fused.bias = nn.Parameter(torch.cat([p.bias.detach() for p in parts]), requires_grad=False)
    return fused


def fuse_projections(module: nn.Module) -> None:
    """Fuse every attention and SwiGLU block under `module` (done once after loading weights)."""
    for sub in list(module.modules()):
        if isinstance(sub, (Attention, SwiGLU)):
            sub.fuse()


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


def attention_inputs(
    layer: DecoderLayer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A layer's work before attention: the norm and the q/k/v projections, normed and rotated."""
    return layer.self_attn.project(layer.input_layernorm(x), cos, sin)


def layer_outputs(layer: DecoderLayer, x: torch.Tensor, mixed: torch.Tensor) -> torch.Tensor:
    """A layer's work after attention: the output projection, the residual and the MLP block."""
    return layer.mlp_block(x + layer.self_attn.o_proj(mixed))


class LayerRegions:
    """The two halves of a decoder layer around its attention (reading and writing the KV cache stays outside):
    eager functions by default, compiled ones once `compilation.compile_frame_step` swaps them in."""

    def __init__(self) -> None:
        self.before = attention_inputs
        self.after = layer_outputs


EAGER_REGIONS = LayerRegions()  # what a pass outside the frame step uses (a prompt's prefill), never compiled


def padding_indices(lengths: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """For sequences of `lengths` packed end to end: the packed position each position of the sequences padded to
    the longest reads ((B, longest); a pad repeats its sequence's last), and each packed position's place among the
    padded ones, flattened (what takes the padded results back)."""
    width = max(lengths)
    starts = itertools.accumulate(lengths, initial=0)
    gather = [[start + min(p, n - 1) for p in range(width)] for start, n in zip(starts, lengths, strict=False)]
    scatter = [b * width + p for b, n in enumerate(lengths) for p in range(n)]
    return torch.tensor(gather, device=device), torch.tensor(scatter, device=device)


class PackedPrompts:
    """Prompts packed end to end, one position after another (`DecoderStack.prefill_packed`), and how attention runs
    over them. Per prompt, over its own positions, as a prompt alone does: padding the prompts to one length changes
    the last bits of a CPU attention kernel's sums (a seeded request must be the same alone and in a burst). Padded
    (`padded`), in one attention call over the prompts padded to the longest: what a GPU wants (one kernel, not one
    per prompt and layer), where a row's last bits depend on its batch anyway."""

    def __init__(self, lengths: list[int], device: torch.device, padded: bool):
        self.padded = padded
        self.longest = max(lengths)
        self.starts = list(itertools.accumulate(lengths, initial=0))
        self.positions = torch.cat([torch.arange(length, device=device) for length in lengths])
        self.last = torch.tensor(self.starts[1:], device=device) - 1  # each prompt's last position
        if padded:
            width = self.longest
            self.gather, self.scatter = padding_indices(lengths, device)
            self.mask = torch.ones(width, width, dtype=torch.bool, device=device).tril()
        else:
            self.masks = {n: torch.ones(n, n, dtype=torch.bool, device=device).tril() for n in set(lengths)}

    def mix(self, attention: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (1, H, N, D), k and v (1, Hkv, N, D) of the packed positions -> the heads' outputs (1, N, H * D). A
        prompt's positions attend causally over its own positions only."""
        if self.padded:  # (1, heads, N, D) -> (B, heads, longest, D); a pad comes after its prompt's positions
            q, k, v = (t[0][:, self.gather].transpose(0, 1) for t in (q, k, v))
            mixed = attention.mix(q, k, v, self.mask)
            return mixed.reshape(-1, mixed.shape[-1])[self.scatter][None]
        mixed = [
            attention.mix(q[:, :, start:stop], k[:, :, start:stop], v[:, :, start:stop], self.masks[stop - start])
            for start, stop in itertools.pairwise(self.starts)
        ]
        return torch.cat(mixed, dim=1)


class DecoderStack(nn.Module):
    """A stack of decoder layers with a final norm, run over whole prompts (prefill) or one token per
    row against a `KVCache` (decode). `rotary_float32` keeps the q/k norm and the rotation in float32 with
    half-precision weights (the official code rotates in the weights' dtype; with float32 weights the two
    are the same)."""

    prefill_in_step = False  # whether `prefill` is part of the frame step (then it uses the step's regions)

    def __init__(self, cfg: DecoderStackConfig, rotary_float32: bool = False):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta)
        self.rotary_float32 = rotary_float32
        self.regions = LayerRegions()  # used by the frame step's passes (`decode`, `decode_aligned`)

    @property
    def rotary_float32(self) -> bool:
        return self._rotary_float32

    @rotary_float32.setter
    def rotary_float32(self, value: bool) -> None:
        self._rotary_float32 = value
        for layer in self.layers:
            layer.self_attn.rotary_float32 = value

    def rotary_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype of the rotary tables for activations of `dtype`."""
        return torch.float32 if self._rotary_float32 else dtype

    def new_cache(self, rows: int, capacity: int, dtype: torch.dtype, device: torch.device) -> KVCache:
        return KVCache(len(self.layers), rows, self.cfg.num_key_value_heads, self.cfg.head_dim, capacity, dtype, device)

    def prefill(self, x: torch.Tensor, cache: KVCache, rows: slice) -> torch.Tensor:
        """Run whole prompts x (B, T, hidden) of equal length causally from position 0, storing their
        keys/values in the B cache rows `rows`."""
        return self.extend(x, cache, rows, 0)

    def prefill_packed(
        self,
        x: torch.Tensor,
        lengths: list[int],
        cache: KVCache,
        rows: list[int],
        padded: bool | None = None,
        every_position: bool = False,
    ) -> torch.Tensor:
        """Run several prompts in one forward, packed end to end: x (sum(lengths), hidden), prompt b the next
        `lengths[b]` positions, stored in cache row `rows[b]` from position 0. Returns each prompt's normed last
        state (B, hidden), or with `every_position` every position's, packed (sum(lengths), hidden). The
        projections and norms take every prompt's positions at once; attention runs as `PackedPrompts` says
        (`padded`: None pads on CUDA only)."""
        device = x.device
        packed = PackedPrompts(lengths, device, device.type == "cuda" if padded is None else padded)
        cache.ensure_capacity(packed.longest)
        owners = torch.cat(
            [torch.full((length,), row, device=device) for row, length in zip(rows, lengths, strict=True)]
        )
        cos, sin = self.rotary.at(packed.positions[None], packed.longest, self.rotary_dtype(x.dtype))
        x = x[None]
        for i, layer in enumerate(self.layers):
            q, k, v = EAGER_REGIONS.before(layer, x, cos, sin)
            cache.k[i, owners, :, packed.positions] = k[0].transpose(0, 1)
            cache.v[i, owners, :, packed.positions] = v[0].transpose(0, 1)
            x = EAGER_REGIONS.after(layer, x, packed.mix(layer.self_attn, q, k, v))
        cache.length[torch.tensor(rows, device=device)] = torch.tensor(lengths, device=device)
        for row, length in zip(rows, lengths, strict=True):
            cache.lengths[row] = length
        return self.norm(x[0] if every_position else x[0, packed.last])

    def extend(self, x: torch.Tensor, cache: KVCache, rows: slice, start: int) -> torch.Tensor:
        """Run x (B, T, hidden) causally at positions `start`.. of the B cache rows `rows`, attending over their
        first `start` positions too (a prompt whose beginning is cached already), and store its keys/values."""
        t = x.shape[1]
        end = start + t
        cache.ensure_capacity(end)
        cos, sin = self.rotary.span(start, end, self.rotary_dtype(x.dtype))
        mask = torch.ones(t, end, dtype=torch.bool, device=x.device).tril(diagonal=start)
        regions = self.regions if self.prefill_in_step else EAGER_REGIONS
        for i, layer in enumerate(self.layers):
            q, k, v = regions.before(layer, x, cos, sin)
            cache.k[i, rows, :, start:end] = k
            cache.v[i, rows, :, start:end] = v
            if start:
                k, v = cache.k[i, rows, :, :end], cache.v[i, rows, :, :end]
            x = regions.after(layer, x, layer.self_attn.mix(q, k, v, mask))
        cache.length[rows] = end
        for row in range(len(cache.lengths))[rows]:
            cache.lengths[row] = end
        return self.norm(x)

    def decode(self, x: torch.Tensor, cache: KVCache, rows: slice | torch.Tensor, span: int) -> torch.Tensor:
        """One token per row, x (B, 1, hidden), for cache rows `rows` (indices, or a slice: a static step over
        a bucket of rows), each at its own position `cache.length`, attending over the first `span` cache
        positions (span must exceed every running row's length). Rows that are not running may be among them:
        their positions are clamped into the span and what they compute is ignored. The caller advances the
        lengths of the running rows (`KVCache.advance`)."""
        positions = cache.length[rows].clamp(max=span - 1)
        index = cache.row_index(rows)
        cos, sin = self.rotary.at(positions[:, None], span, self.rotary_dtype(x.dtype))
        mask = (torch.arange(span, device=x.device)[None] <= positions[:, None])[:, None, None, :]
        for i, layer in enumerate(self.layers):
            q, k, v = self.regions.before(layer, x, cos, sin)
            cache.k[i, index, :, positions] = k[:, :, 0]
            cache.v[i, index, :, positions] = v[:, :, 0]
            keys = cache.k[i, rows, :, :span]
            values = cache.v[i, rows, :, :span]
            x = self.regions.after(layer, x, layer.self_attn.mix(q, keys, values, mask))
        return self.norm(x)

    def decode_aligned(self, x: torch.Tensor, cache: KVCache, position: int) -> torch.Tensor:
        """Append one token to every cache row, all at the same `position` (no mask, plain slicing)."""
        cos, sin = self.rotary.span(position, position + 1, self.rotary_dtype(x.dtype))
        for i, layer in enumerate(self.layers):
            q, k, v = self.regions.before(layer, x, cos, sin)
            cache.k[i, :, :, position : position + 1] = k
            cache.v[i, :, :, position : position + 1] = v
            keys = cache.k[i, :, :, : position + 1]
            values = cache.v[i, :, :, : position + 1]
            x = self.regions.after(layer, x, layer.self_attn.mix(q, keys, values, None))
        return self.norm(x)
