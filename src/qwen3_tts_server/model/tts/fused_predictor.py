"""The code predictor's 15 passes through fused Triton kernels (`model/kernels/`): five launches per layer
and one per code, where the layer-by-layer path (`CodePredictor.predict`) launches some twenty per layer and a dozen
per code. Same weights, same float32 points, the same sampling (each row's own random numbers, so a row chooses the
same codes alone or in a batch).

`FusedPredictorPath` decides whether the fused passes run and keeps them safe: built on first use and checked there
against the layer-by-layer passes, teacher-forced on the same inputs; a build, launch or check that fails turns them
off with one warning, and the layer-by-layer passes go on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from .. import kernels
from ..cpu_linear import RowwiseLinear
from ..layers import DecoderLayer, Embedding, RMSNorm, Rotary, fuse_projections
from .predictor_path import PredictorPath
from .sampling import RowSampling
from .talker import CodePredictor

log = logging.getLogger(__name__)

# The largest relative difference of any pass's logits from the layer-by-layer path's that the first-use check
# accepts: float32 arithmetic in both (the kernels' sums in another order), or the half-precision roundings that the
# two paths place differently.
CHECK_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 1e-2}


class FusedMismatch(RuntimeError):
    """The fused passes' logits differ from the layer-by-layer passes' beyond `CHECK_TOLERANCE`."""


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    out: torch.Tensor
    out_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor

    @classmethod
    def of(cls, layer: DecoderLayer) -> _Layer:
        attention, mlp = layer.self_attn, layer.mlp
        assert attention.qkv_proj is not None and attention.qk_norm_weight is not None
        assert mlp.gate_up_proj is not None
        return cls(
            input_norm=layer.input_layernorm.weight.detach(),
            qkv=attention.qkv_proj.weight.detach(),
            qkv_bias=_bias(attention.qkv_proj),
            q_norm=attention.qk_norm_weight[0].contiguous(),
            k_norm=attention.qk_norm_weight[attention.heads].contiguous(),
            out=attention.o_proj.weight.detach(),
            out_bias=_bias(attention.o_proj),
            post_norm=layer.post_attention_layernorm.weight.detach(),
            gate_up=mlp.gate_up_proj.weight.detach(),
            down=mlp.down_proj.weight.detach(),
        )


def _bias(linear: nn.Module) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach()


def unsupported(predictor: CodePredictor) -> str | None:
    """Why the fused passes cannot run this predictor (quantised or packed linears, mixed dtypes, an unusual head
    size), or None."""
    linear_kinds = (nn.Linear, RowwiseLinear)  # a RowwiseLinear keeps the plain weight (model/cpu_linear.py)
    for module in predictor.modules():
        if not any(module.children()) and type(module) not in (*linear_kinds, nn.Identity, RMSNorm, Embedding, Rotary):
            return f"its {type(module).__name__} layers (quantised or packed weights)"
    dtype = predictor.model.norm.weight.dtype
    linears = [module for module in predictor.modules() if type(module) in linear_kinds]
    if any(type(module.weight.data) is not torch.Tensor for module in linears):
        return "quantised weights"  # torchao keeps a plain Linear whose weight is a tensor of its own
    if dtype not in CHECK_TOLERANCE or any(module.weight.dtype != dtype for module in linears):
        return f"weights in {dtype} or mixed dtypes"
    head_dim = predictor.model.cfg.head_dim
    if head_dim & (head_dim - 1):
        return f"a head size of {head_dim} (a power of two is needed)"
    return None


class FusedCodePredictor:
    """The passes of one `CodePredictor` through the fused kernels, reading its weights in place (and one table per
    codebook: its embedding already through the projection to the predictor's width)."""

    def __init__(self, predictor: CodePredictor):
        model = predictor.model
        if any(layer.self_attn.qkv_proj is None for layer in model.layers):
            fuse_projections(model)
        cfg = model.cfg
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.layers = [_Layer.of(layer) for layer in model.layers]
        self.norm = model.norm.weight.detach()
        self.heads_out = [head.weight.detach() for head in predictor.lm_head]
        self.project = predictor.small_to_mtp_projection
        self.slots = 1 << len(predictor.lm_head).bit_length()  # the passes' positions, rounded up to a power of two
        self.cos, self.sin = model.rotary.table(self.slots, torch.float32)
        dtype = self.norm.dtype
        with torch.no_grad():
            self.tables = [self._table(embedding.weight, dtype) for embedding in model.codec_embedding]

    def _table(self, embedding: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Every code's input to the next pass: its embedding through the projection, computed in float32."""
        if isinstance(self.project, nn.Identity):
            return embedding.to(dtype).contiguous()
        weight, bias = self.project.weight.float(), self.project.bias
        table = embedding.float() @ weight.T + (0 if bias is None else bias.float())
        return table.to(dtype).contiguous()

    @torch.inference_mode()
    def predict(
        self,
        talker_hidden: torch.Tensor,
        code0_embedding: torch.Tensor,
        sampling: RowSampling,
        uniforms: torch.Tensor,
        logits_seen: list[torch.Tensor] | None = None,
        forced: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """As `CodePredictor.predict`, the codes chosen by the sampler kernel: talker_hidden, code0_embedding
        (B, 1, talker hidden); uniforms (B, G-1) float64, each row's random number for each codebook. Each pass's
        logits are appended to `logits_seen` when it is given; `forced` (B, G-1) replaces the chosen codes (teacher
        forcing, to measure how often the logits' argmax agrees with a reference's codes)."""
        rows = talker_hidden.shape[0]
        x = self.project(torch.cat((talker_hidden, code0_embedding), dim=1)).reshape(2 * rows, -1).contiguous()
        shape = (len(self.layers), rows, self.kv_heads, self.slots, self.head_dim)
        k_cache = torch.empty(shape, dtype=x.dtype, device=x.device)
        v_cache = torch.empty_like(k_cache)
        groups = len(self.heads_out)
        codes = torch.empty(rows, groups, dtype=torch.long, device=x.device)
        next_input = torch.empty(rows, x.shape[1], dtype=x.dtype, device=x.device)
        temperature, top_p = sampling.temperature[:, 0].contiguous(), sampling.top_p[:, 0].contiguous()
        start, tokens = 0, 2  # the first pass takes the talker's state and codebook 0's embedding; then one code
        for group in range(groups):
            hidden = self._stack(x, k_cache, v_cache, start, tokens)[tokens - 1 :: tokens]
            logits = kernels.norm_matmul(hidden, self.heads_out[group], self.norm, self.eps, out_dtype=torch.float32)
            if logits_seen is not None:
                logits_seen.append(logits.clone())
            kernels.sample(
                logits,
                sampling.do_sample,
                temperature,
                sampling.top_k,
                top_p,
                uniforms[:, group],
                codes[:, group],
                self.tables[group],
                next_input,
            )
            if forced is not None:
                codes[:, group] = forced[:, group]
                next_input.copy_(self.tables[group][forced[:, group]])
            x, start, tokens = next_input, start + tokens, 1
        return codes

    def _stack(
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, start: int, tokens: int
    ) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            qkv = kernels.norm_matmul(x, layer.qkv, layer.input_norm, self.eps, bias=layer.qkv_bias)
            mixed = kernels.attend(
                qkv, layer.q_norm, layer.k_norm, self.cos, self.sin, k_cache[i], v_cache[i], start, self.heads, self.eps
            )
            x = kernels.norm_matmul(mixed, layer.out, bias=layer.out_bias, residual=x)
            gated = kernels.norm_matmul(x, layer.gate_up, layer.post_norm, self.eps, swiglu=True)
            x = kernels.norm_matmul(gated, layer.down, residual=x)
        return x


def check(
    fused: FusedCodePredictor,
    reference: CodePredictor,
    talker_hidden: torch.Tensor,
    code0_embedding: torch.Tensor,
    sampling: RowSampling,
    uniforms: torch.Tensor,
) -> tuple[torch.Tensor, float]:
    """The fused passes' codes, and the largest relative difference of their logits from those of the layer-by-layer
    passes fed the same codes (teacher-forced). Raises `FusedMismatch` beyond `CHECK_TOLERANCE`."""
    fused_logits: list[torch.Tensor] = []
    codes = fused.predict(talker_hidden, code0_embedding, sampling, uniforms, fused_logits)
    reference_logits: list[torch.Tensor] = []

    def teacher(logits: torch.Tensor) -> torch.Tensor:
        reference_logits.append(logits)
        return codes[:, len(reference_logits) - 1]

    with torch.inference_mode():
        reference.predict(talker_hidden, code0_embedding, teacher)
    worst = max(
        float((got - want).norm() / want.norm().clamp(min=1e-30))
        for got, want in zip(fused_logits, reference_logits, strict=True)
    )
    tolerance = CHECK_TOLERANCE[talker_hidden.dtype]
    if not worst <= tolerance:
        raise FusedMismatch(f"logits differ by {worst:.2e} (relative), more than {tolerance:.0e}")
    return codes, worst


class FusedPredictorPath(PredictorPath):
    """Whether a generator's code predictor runs fused, and the fused passes once built. `state`: "on", "off (why)"
    or "failed (why)"; `predict` returns None whenever the layer-by-layer passes must run instead."""

    def __init__(self, predictor: CodePredictor, wanted: bool | None):
        self.reference = predictor
        self.fused: FusedCodePredictor | None = None
        self.failure: str | None = None
        self.checked = False
        self.off_reason = self._off_reason(predictor, wanted)

    @staticmethod
    def _off_reason(predictor: CodePredictor, wanted: bool | None) -> str | None:
        device = predictor.model.norm.weight.device
        if wanted is False:
            return "not asked for"
        if not kernels.available(device):
            return "needs Triton and a CUDA device"
        if wanted is None and device.type != "cuda":
            return "not on CUDA"
        return unsupported(predictor)

    def predict(
        self,
        talker_hidden: torch.Tensor,
        code0_embedding: torch.Tensor,
        sampling: RowSampling,
        uniforms: torch.Tensor,
    ) -> torch.Tensor | None:
        """The fused passes' codes, or None when they are off (or have just failed: the caller runs the layer-by-layer
        passes). The first call builds and checks them; it must not be inside a graph capture."""
        if not self.active:
            return None
        try:
            if self.checked:
                assert self.fused is not None
                return self.fused.predict(talker_hidden, code0_embedding, sampling, uniforms)
            if talker_hidden.is_cuda and torch.cuda.is_current_stream_capturing():
                raise RuntimeError("first used inside a graph capture")
            self.fused = FusedCodePredictor(self.reference)
            codes, worst = check(self.fused, self.reference, talker_hidden, code0_embedding, sampling, uniforms)
            log.info("fused code predictor on: its logits within %.1e of the layer-by-layer passes'", worst)
            self.checked = True
            return codes
        except Exception as exc:  # a kernel that cannot build or run must not stop synthesis
            self.failure = f"{type(exc).__name__}: {exc}"
            self.fused = None
            log.warning("fused code predictor off: %s; the layer-by-layer passes run (same sampling)", self.failure)
            return None
