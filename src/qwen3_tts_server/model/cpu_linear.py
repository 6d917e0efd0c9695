"""Float32 linear layers on a CPU with their weights reordered once into oneDNN's blocked layout.

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
ONEDNN_MIN_WEIGHTS weights (none in the released checkpoints, which start at 1024 x 1024; the test checkpoints are
all such) computes each row alone with sgemm instead (`RowwiseLinear`), as batch-invariant and cheaper at that size.

The layer uses PyTorch's own oneDNN operators (`mkldnn._reorder_linear_weight`, `mkldnn._linear_pointwise`, what
its compiler's CPU weight prepacking emits); where they are missing or fail a check on a small layer, the layers
stay as they were, with one warning."""

from __future__ import annotations

import logging

import torch
from torch import nn
from torch.nn import functional as F

log = logging.getLogger(__name__)

ROWS_HINT = 8  # the row count the layout is tuned for; any count works
MIN_ROWS = 2  # a single row is computed as this many (alone it would take another summation order)
MAX_RELATIVE_ERROR = 1e-4
ONEDNN_MIN_WEIGHTS = 1 << 20  # smaller layers compute row by row with sgemm


class PrepackedLinear(nn.Module):
    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS_HINT)
        self.bias = linear.bias

    @torch.compiler.disable  # torch.compile cannot trace oneDNN's opaque weights: the layer runs as it does eagerly
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() != self.in_features:  # not a single row
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        rows = x.reshape(1, self.in_features).expand(MIN_ROWS, -1).contiguous()
        out = torch.ops.mkldnn._linear_pointwise(rows, self.packed, self.bias, "none", [], "")
        return out[:1].reshape(*x.shape[:-1], self.out_features)


class RowwiseLinear(nn.Module):
    """A small float32 layer whose rows are computed one at a time, each by sgemm's single-row product: a row's bits
    never depend on the rows beside it."""

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


@torch.inference_mode()
def _check_operators() -> None:
    """The operators exist in this build and agree with sgemm, on a small random layer."""
    generator = torch.Generator().manual_seed(0)
    linear = nn.Linear(64, 48)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(48, 64, generator=generator))
    probe = torch.randn(3, 64, generator=generator)
    want, got = linear(probe), PrepackedLinear(linear)(probe)
    error = ((got - want).norm() / want.norm()).item()
    if not error <= MAX_RELATIVE_ERROR:  # NaN fails too
        raise ValueError(f"a reordered layer's output is {error:.3g} away from the plain layer's")


def prepack_linears(module: nn.Module) -> str | None:
    """Replace every float32 CPU `nn.Linear` under `module` by its reordered form (a small one by its row-by-row
    form), one at a time (the plain weight freed as its copy goes in). Returns None when done, else why not (the
    operators are missing or wrong in this build: then every layer stays as it was)."""
    try:
        _check_operators()
    except Exception as exc:  # an operator this build lacks, or one that fails: the plain layers still work
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("float32 linear layers not reordered for oneDNN: %s", reason)
        return reason
    targets = [
        (owner, name)
        for owner in module.modules()
        for name, child in owner.named_children()
        if type(child) is nn.Linear and child.weight.device.type == "cpu" and child.weight.dtype == torch.float32
    ]
    for owner, name in targets:
        layer = getattr(owner, name)
        small = layer.in_features * layer.out_features < ONEDNN_MIN_WEIGHTS
        setattr(owner, name, RowwiseLinear(layer) if small else PrepackedLinear(layer))
    return None
