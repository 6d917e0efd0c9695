"""Fused Triton kernels for the small decoder passes of a frame step (the code predictor's 15 passes).

A pass over a few rows is bound by its kernels' launches and latencies, not by the bytes it reads: these kernels
fold the work of one decoder layer into five launches (norm + projection, q/k norm + rotation + cache write +
attention, projection + residual, norm + gate/up projection + SwiGLU, projection + residual) and choose a code,
writing the next pass's input, in one more. Each keeps the reference's float32 points: norms, rotations, softmax
and accumulation in float32, whatever the weights' dtype.

On a CPU the same kernels run through Triton's interpreter (`TRITON_INTERPRET=1`, set before this module is
imported), slowly: that is how the tests check them. Triton is imported on the first launch (`triton_code.py` holds
the kernels); `available()` says whether it can be, and nothing else in the project needs it.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from types import ModuleType

import torch


def available(device: torch.device) -> bool:
    """Whether these kernels can run on `device`: Triton is installed, and the device is CUDA (or Triton interprets
    the kernels on the CPU, as the tests ask)."""
    if importlib.util.find_spec("triton") is None:
        return False
    return device.type == "cuda" or _interpreting()


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


_PLAIN, _SWIGLU = 0, 1  # what `norm_matmul` does after the product


@cache
def _code() -> ModuleType:
    from . import triton_code

    return triton_code


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _blocks(m: int, n: int, k: int) -> tuple[int, int, int]:
    """Tile sizes: rows in blocks of at least 16 (Triton's smallest product), narrow column blocks so that a
    one-row pass still spreads its weights over many programs. The interpreter takes tiles as large as Triton allows
    (numpy runs a tile at once; programs run one after another)."""
    if _interpreting():
        return (
            max(16, min(64, _next_power_of_2(m))),
            max(16, min(512, _next_power_of_2(n))),
            max(16, min(512, _next_power_of_2(k))),
        )
    block_m = 16 if m <= 16 else 32 if m <= 32 else 64
    block_n = max(16, min(64, _next_power_of_2(n)))
    block_k = max(16, min(128, _next_power_of_2(k)))
    return block_m, block_n, block_k


def norm_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    swiglu: bool = False,
    out_dtype: torch.dtype | None = None,
    blocks: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """(rms_norm(x) * norm_weight) @ weight.T + bias + residual, in one kernel. x (M, K) with unit stride along K;
    weight (N, K) as nn.Linear keeps it. Without `norm_weight` x goes in as it is. `swiglu`: weight holds gate and
    up stacked (2N, K) and the result is silu(gate) * up (M, N). Accumulates in float32; the result is in
    `out_dtype` (x's by default); `blocks` (rows, columns, depth) overrides the tile sizes."""
    m, k = x.shape
    n = weight.shape[0] // (2 if swiglu else 1)
    if x.stride(1) != 1 or not weight.is_contiguous():
        raise ValueError("norm_matmul takes rows with unit stride and a contiguous weight")
    out = torch.empty(m, n, dtype=out_dtype or x.dtype, device=x.device)
    if residual is not None and residual.stride(1) != 1:
        raise ValueError("the residual needs unit stride along its rows")
    block_m, block_n, block_k = blocks or _blocks(m, n, k)
    grid = (_cdiv(m, block_m), _cdiv(n, block_n))
    _code().norm_matmul_kernel[grid](
        x,
        norm_weight if norm_weight is not None else x,
        weight,
        bias if bias is not None else x,
        residual if residual is not None else x,
        out,
        m,
        n,
        x.stride(0),
        residual.stride(0) if residual is not None else 0,
        out.stride(0),
        eps,
        K=k,
        HAS_NORM=norm_weight is not None,
        HAS_BIAS=bias is not None,
        HAS_RESIDUAL=residual is not None,
        EPILOGUE=_SWIGLU if swiglu else _PLAIN,
        IN_FLOAT32=weight.dtype == torch.float32 or _interpreting(),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )
    return out


def attend(
    qkv: torch.Tensor,
    q_norm: torch.Tensor,
    k_norm: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    start: int,
    heads: int,
    eps: float,
) -> torch.Tensor:
    """Attention of `tokens` new tokens per row over a few cache slots, in one kernel. qkv (B * tokens, (H + 2 Hkv) D)
    as the fused projection gives it, row b's tokens at positions start, start + 1, ...; each token's queries and
    keys are normed over D (q_norm, k_norm: (D,)) and rotated (cos, sin: (slots, D) float32 tables, the sine signed
    as `layers.Rotary` keeps it) in float32, its keys and values written to the caches (B, Hkv, slots, D) at its
    position, and its queries attend causally over the slots written so far. Returns the heads' outputs side by
    side, (B * tokens, H D)."""
    rows, kv_heads, slots, head_dim = k_cache.shape
    tokens = qkv.shape[0] // rows
    if not (k_cache.is_contiguous() and v_cache.is_contiguous() and qkv.is_contiguous()):
        raise ValueError("attend takes contiguous q/k/v and caches")
    if start + tokens > slots or slots & (slots - 1) or head_dim & (head_dim - 1):
        raise ValueError("attend needs the tokens to fit the slots, and powers of two for slots and head size")
    out = torch.empty(qkv.shape[0], heads * head_dim, dtype=qkv.dtype, device=qkv.device)
    _code().attend_kernel[(rows, kv_heads)](
        qkv,
        q_norm,
        k_norm,
        cos,
        sin,
        k_cache,
        v_cache,
        out,
        start,
        eps,
        head_dim**-0.5,
        k_cache.stride(0),
        k_cache.stride(1),
        TOKENS=tokens,
        HEADS=heads,
        KV_HEADS=kv_heads,
        GROUP=heads // kv_heads,
        D=head_dim,
        SLOTS=slots,
    )
    return out


def sample(
    logits: torch.Tensor,
    do_sample: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    uniform: torch.Tensor,
    codes: torch.Tensor,
    table: torch.Tensor,
    next_input: torch.Tensor,
) -> None:
    """Choose one code per row from its logits (B, V) float32, as `sampling.choose` does (temperature, top-k, top-p,
    then the first code whose cumulative probability reaches the row's `uniform` number; the argmax for rows that
    do not sample), write it to `codes` (B,), a column of a wider tensor if need be, and the code's row of `table`
    (V, H) to `next_input` (B, H). Settings per row: do_sample (B,) bool, temperature and top_p (B,) float32,
    top_k (B,) integers (0: off), uniform (B,) in (0, 1]."""
    rows, vocab = logits.shape
    hidden = table.shape[1]
    if logits.stride(1) != 1 or not (table.is_contiguous() and next_input.is_contiguous()):
        raise ValueError("sample takes logits with unit stride and contiguous tables")
    _code().sample_kernel[(rows,)](
        logits,
        do_sample,
        temperature,
        top_k,
        top_p,
        uniform,
        codes,
        table,
        next_input,
        vocab,
        logits.stride(0),
        uniform.stride(0),
        codes.stride(0),
        H=hidden,
        BLOCK_V=_next_power_of_2(vocab),
        BLOCK_H=min(1024, _next_power_of_2(hidden)),
    )
