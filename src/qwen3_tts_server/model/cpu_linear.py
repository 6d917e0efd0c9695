"""Float32 (and, where the CPU multiplies it natively, bfloat16) linear layers on a CPU with their weights reordered
once into oneDNN's blocked layout.

A plain `nn.Linear` goes to MKL's sgemm, which packs the weight matrix on every call: with a few rows (a decode
step of several streams) that packing costs more than the product. Reordered once at load, the weights are read as
they are: on the 2-core AVX2 machine of the benchmarks, 28 layers of 1024 x 3072 took 79 ms for eight rows with
sgemm and 33 ms reordered, 30 and 24 ms for one row; one such layer over 405 rows (a prompt), 27 and 22 ms. The
results differ from sgemm's in the last bits only (another summation order).

A row's result does not depend on the rows beside it: oneDNN's product gives a row the same bits in any batch of two
rows or more, wherever the row sits in it, while a single row takes another path (its last bits differ). So one row
is computed as two: a decode step gives a stream the same numbers alone or batched with any others, and seeded
sampling draws the same codes (sgemm's last bits change with the row count, from 1 to 2 and again past 15, which a
near tie between two codes turns into another code).

A oneDNN product costs some 50 us whatever its size, several times a small layer's whole sgemm: a layer under
ONEDNN_MIN_WEIGHTS weights (none in the released checkpoints, whose smallest are the 0.6B recogniser's audio
encoder's 896 x 896; the test checkpoints are all such) computes each row alone with sgemm instead
(`RowwiseLinear`), as batch-invariant and cheaper at that size for a few rows. (Row by row, that encoder's layers
took 1.31 s for a block of 104 tokens in float32 where reordered they take 0.49 s.)

In bfloat16 a plain layer goes to oneDNN already, but reorders its weights on every call: on the benchmarks' 2-core
AMX machine, with the 0.6B recogniser's layers reordered (its audio encoder's, and its dense prefill weights through
`reorder_weight`), a live pass's encoding took 1.23x less time and its prefill 1.18x less, with the same bits
(benchmarks/reordered_layers.py). A row's bits are the same in any batch of 2 to 32 rows (past that oneDNN may take
another kernel; a CPU's decode step holds 8 rows at most).

The layer uses PyTorch's own oneDNN operators (`mkldnn._reorder_linear_weight`, `mkldnn._linear_pointwise`, what
its compiler's CPU weight prepacking emits); where they are missing or fail a check on a small layer, the layers
stay as they were, with one warning."""

from __future__ import annotations

import functools
import logging

import torch
from torch import nn
from torch.nn import functional as F

log = logging.getLogger(__name__)

ROWS_HINT = 8  # the row count the layout is tuned for; any count works
MIN_ROWS = 2  # a single row is computed as this many (alone it would take another summation order)
MAX_RELATIVE_ERROR = {torch.float32: 1e-4, torch.bfloat16: 1e-2}  # a reordered layer's, against the plain one's
ONEDNN_MIN_WEIGHTS = 1 << 19  # smaller layers compute row by row with sgemm


def reorder_weight(weight: torch.Tensor) -> torch.Tensor:
    """W [out, in] in oneDNN's blocked layout (an opaque tensor, same dtype and size), for `multiply_reordered`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), ROWS_HINT)


@torch.compiler.disable  # torch.compile cannot trace oneDNN's opaque weights: the product runs as it does eagerly
def multiply_reordered(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x W^T (+ b) for a `reorder_weight` W, x [..., in] of W's dtype."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class PrepackedLinear(nn.Module):
    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = reorder_weight(linear.weight)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() != self.in_features:  # not a single row
            return multiply_reordered(x, self.packed, self.bias)
        rows = x.reshape(1, self.in_features).expand(MIN_ROWS, -1).contiguous()
        out = multiply_reordered(rows, self.packed, self.bias)
        return out[:1].reshape(*x.shape[:-1], self.out_features)


class RowwiseLinear(nn.Module):
    """A small layer whose rows are computed one at a time, each by the single-row product: a row's bits never depend
    on the rows beside it."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    @torch.compiler.disable  # a loop over the rows: compiled, it would be fused into one batched product
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if len(rows) <= 1:
            return F.linear(x, self.weight, self.bias)
        out = torch.cat([F.linear(row, self.weight, self.bias) for row in rows.split(1)])
        return out.reshape(*x.shape[:-1], self.out_features)


@functools.cache
@torch.inference_mode()
def operators_failure(dtype: torch.dtype = torch.float32) -> str | None:
    """None where the operators exist in this build and agree with the plain product in `dtype` on a small random
    layer; else why not (checked once per dtype)."""
    try:
        generator = torch.Generator().manual_seed(0)
        linear = nn.Linear(64, 48)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(48, 64, generator=generator))
        linear.to(dtype)
        probe = torch.randn(3, 64, generator=generator).to(dtype)
        want, got = linear(probe).float(), PrepackedLinear(linear)(probe).float()
        error = ((got - want).norm() / want.norm()).item()
        if not error <= MAX_RELATIVE_ERROR[dtype]:  # NaN fails too
            raise ValueError(f"a reordered layer's output is {error:.3g} away from the plain layer's")
    except Exception as exc:  # an operator this build lacks, or one that fails: the plain layers still work
        return f"{type(exc).__name__}: {exc}"
    return None


def prepack_linears(
    module: nn.Module, dtype: torch.dtype = torch.float32, skip: tuple[nn.Module, ...] = ()
) -> str | None:
    """Replace every CPU `nn.Linear` in `dtype` under `module` (but those in `skip`) by its reordered form (a small
    one by its row-by-row form), one at a time (the plain weight freed as its copy goes in). Returns None when done,
    else why not (the operators are missing or wrong in this build: then every layer stays as it was)."""
    reason = operators_failure(dtype)
    if reason is not None:
        log.warning("%s linear layers not reordered for oneDNN: %s", str(dtype).removeprefix("torch."), reason)
        return reason
    targets = [
        (owner, name)
        for owner in module.modules()
        for name, child in owner.named_children()
        if type(child) is nn.Linear
        and child not in skip
        and child.weight.device.type == "cpu"
        and child.weight.dtype == dtype
    ]
    for owner, name in targets:
        layer = getattr(owner, name)
        small = layer.in_features * layer.out_features < ONEDNN_MIN_WEIGHTS
        setattr(owner, name, RowwiseLinear(layer) if small else PrepackedLinear(layer))
    return None
