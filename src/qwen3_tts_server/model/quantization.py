"""Quantisation of decoder layers and output heads (`QUANTIZE`): the talker's and the code predictor's, and the
speech recogniser's; weight-only int8, int4 and fp8, and on a CPU W8A8 (`DynamicInt8Linear`).

A frame reads every decoder weight once in the talker and fifteen times in the code predictor, one row at a
time: on a CPU a step is bound by reading weights, not by arithmetic. Stored in 8 or 4 bits they are read 4 or
8 times faster than in float32. The matrix products are PyTorch's own packed kernels (`_weight_int8pack_mm`,
`_weight_int4pack_mm_for_cpu`), which take bfloat16 activations: the quantised layers convert their input to
bfloat16 and their output back, so every other part of the model keeps the model's dtype. torchao's CPU paths
were measured first: its int8 weight-only tensor dequantises on every call (no faster than bfloat16 here) and its
CPU int4 layout is a prototype. On CUDA, torchao's weight-only configurations are the right tool (tinygemm, fp8).

What stays in the model's dtype: embeddings, norms, rotary tables, the text projection (prompts only) and the codec
decoder. The heads are quantised to int8 in either mode (`quantize_talker`).
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ..errors import ConfigurationError
from .cpu_linear import multiply_reordered, operators_failure, reorder_weight
from .device import cpu_has_vnni
from .layers import DecoderLayer

log = logging.getLogger(__name__)

QUANTIZATIONS = ("int8", "int4", "fp8", "w8a8")
CUDA_ONLY = ("fp8",)
CPU_ONLY = ("w8a8",)
INT4_GROUP_SIZES = (128, 64, 32)  # the largest that divides a layer's input width is used
INT4_INNER_K_TILES = 2  # the packing's tile depth: (input width) must be a multiple of 16 * this


def quantization_state(quantization: str | None, failure: str | None) -> str:
    """A loaded model's weight quantisation as reported: "int8" | "int4" | "fp8", "none", or "failed (reason)" when
    the one asked for could not run here and the model runs in its dtype."""
    if failure is not None:
        return f"failed ({failure})"
    return quantization or "none"


def parse_quantization(name: str | None, device: torch.device) -> str | None:
    """The quantisation to apply ("none" or empty: None), checked against the device."""
    if name is None or name.strip().lower() in ("", "none"):
        return None
    mode = name.strip().lower()
    if mode not in QUANTIZATIONS:
        raise ConfigurationError(
            f"unknown quantization {name!r}; choose one of none, {', '.join(QUANTIZATIONS)}", param="quantize"
        )
    if mode in CUDA_ONLY and device.type != "cuda":
        raise ConfigurationError(
            f"quantization {mode} needs a CUDA GPU (float8 matrix products); on a CPU use int8 or int4",
            param="quantize",
        )
    if mode in CPU_ONLY and device.type != "cpu":
        raise ConfigurationError(
            f"quantization {mode} runs on a CPU (fbgemm's integer kernels); on a GPU use int8, int4 or fp8",
            param="quantize",
        )
    return mode


class PackedLinear(nn.Module):
    """y = x W^T (+ b) through one of PyTorch's packed kernels: the input's rows go in as contiguous bfloat16 (what
    the kernels take) and the output comes back in the input's dtype. Subclasses pack W and name the kernel."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.out_features = linear.out_features
        self.bias = linear.bias
        # From this many rows on, a prompt's prefill (bound by arithmetic, where the packed kernels are slow) is
        # multiplied by a dense matrix product instead, W dequantised for the call (`dense`). None: always packed.
        self.dense_from_rows: int | None = None
        # The dense product's dtype: None, the input's (float32 sgemm, on CPUs without bfloat16 instructions);
        # bfloat16 where the CPU multiplies it natively, 2 to 3 times faster than float32 and than the packed kernel.
        self.dense_dtype: torch.dtype | None = None
        # Where set (`keep_dense_weights`), the dequantised W in `dense_dtype`, kept between calls: a prefill then
        # pays no conversion, for the memory of a second copy of the weights (a buffer: memory budgets count it).
        self.dense_weight: torch.Tensor | None
        self.register_buffer("dense_weight", None, persistent=False)

    # The dtype the kernel takes its rows in.
    kernel_dtype = torch.bfloat16

    def multiply(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def dense(self, x: torch.Tensor) -> torch.Tensor | None:
        """x W^T (+ b) by a dense matrix product, where W dequantises cheaply; None where it does not."""
        return None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if self.dense_from_rows is not None and len(rows) >= self.dense_from_rows:
            y = self.dense(x)
            if y is not None:
                return y
        y = self.multiply(rows.to(self.kernel_dtype).contiguous())
        y = y.to(x.dtype).view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


def _channel_scales(weight: torch.Tensor) -> torch.Tensor:
    """Symmetric int8 scales, one per output channel: its largest magnitude maps to 127."""
    return weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127


class Int8Linear(PackedLinear):
    """W stored as int8, one float scale per output channel (symmetric)."""

    def __init__(self, linear: nn.Linear):
        super().__init__(linear)
        weight = linear.weight.detach().float()
        scale = _channel_scales(weight)
        self.register_buffer("weight", torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scales", scale.to(torch.bfloat16))

    def multiply(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int8pack_mm(rows, self.weight, self.scales)

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        """W for the dense product of rows in `dtype`: in the dense dtype, the codes alone (exact in bfloat16, as in
        the packed kernel, which also takes bfloat16 rows; the scales multiply the product's output); without one,
        the codes times their scales in `dtype`."""
        if self.dense_dtype is None:
            return self.weight.to(dtype) * self.scales.to(dtype)[:, None]
        return self.weight.to(self.dense_dtype)

    def keep_dense_weights(self, dtype: torch.dtype) -> None:
        """Keep W for long prefills; in bfloat16 on a CPU reordered once for oneDNN, which a plain product does on
        every call (the same bits; `model/cpu_linear.py`)."""
        weight = self.dequantized(dtype)
        reorderable = self.dense_dtype == torch.bfloat16 and weight.device.type == "cpu"
        if reorderable and operators_failure(torch.bfloat16) is None:
            weight = reorder_weight(weight)
        self.dense_weight = weight

    def dense(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.dense_weight if self.dense_weight is not None else self.dequantized(x.dtype)
        if self.dense_dtype is None:
            return nn.functional.linear(x, weight.to(x.dtype), self.bias)
        rows = x.to(self.dense_dtype)
        y = multiply_reordered(rows, weight) if weight.is_mkldnn else nn.functional.linear(rows, weight)
        y = y.to(x.dtype) * self.scales.to(x.dtype)
        return y if self.bias is None else y + self.bias


class DynamicInt8Linear(Int8Linear):
    """W8A8: W as `Int8Linear` stores it, and each input row quantised to 8 bits when it comes, the product taken in
    integer arithmetic by fbgemm's dynamic linear kernel (AVX-512 VNNI or AVX2 dot products) instead of PyTorch's
    weight-only kernel, which converts every weight to bfloat16 on the way (bound by that arithmetic on CPUs
    without bfloat16 instructions).

    fbgemm quantises its whole input with one scale and zero point, so a row's codes would depend on the rows beside
    it: load would change a transcript. Each row is therefore divided by its own largest magnitude, and the input
    gains two columns holding +1 and -1 (the weights are zero there): every call's range is exactly [-1, 1], a row
    quantises as it would alone, and its output is multiplied back by its magnitude. Without VNNI, fbgemm's AVX2
    products add pairs in 16 bits: `reduce_range` keeps activations to 7 bits there so that no sum saturates."""

    kernel_dtype = torch.float32

    def __init__(self, linear: nn.Linear, reduce_range: bool):
        super().__init__(linear)  # the codes stay as well, for the dense product of long prefills
        self.in_features = linear.in_features
        self.reduce_range = reduce_range
        padded = nn.functional.pad(self.weight, (0, 2))  # zero weights for the two range columns
        scale = _channel_scales(linear.weight.detach().float()).double()
        zero_points = torch.zeros(len(scale), dtype=torch.long)
        with warnings.catch_warnings():  # quantised tensors are deprecated for a later PyTorch than the one pinned
            warnings.simplefilter("ignore", UserWarning)
            quantized = torch._make_per_channel_quantized_tensor(padded, scale, zero_points, 0)
        with quantized_engine("fbgemm"):
            self.packed = torch.ops.quantized.linear_prepack(quantized, None)
        self.range_columns = torch.tensor([[1.0, -1.0]])  # every row's two extra inputs

    def release_codes(self) -> None:
        """Drop the int8 codes (fbgemm keeps its own packed copy)."""
        self.weight = None

    @property
    def converts_codes(self) -> bool:
        """Whether its long prefills dequantise the codes call by call (a dense product, its weights not kept)."""
        return self.dense_from_rows is not None and self.dense_weight is None

    def keep_dense_weights(self, dtype: torch.dtype) -> None:
        super().keep_dense_weights(dtype)
        # dropped at once rather than by `release_unused_codes` at the load's end: the load's peak then holds one
        # layer's codes beside the dense copies, not every layer's
        self.release_codes()

    def multiply(self, rows: torch.Tensor) -> torch.Tensor:
        # Few operations: a frame calls this some 400 times a row, where each operation's dispatch costs more than
        # its arithmetic (the largest magnitude as one reduction, the range columns joined by one copy).
        magnitude = torch.linalg.vector_norm(rows, float("inf"), dim=1, keepdim=True)
        magnitude.clamp_(min=torch.finfo(torch.float32).tiny)
        # rows.shape[0], not len(rows): a trace records it as an operation and serves other row counts
        augmented = torch.cat((rows / magnitude, self.range_columns.expand(rows.shape[0], 2)), dim=1)
        return torch.ops.quantized.linear_dynamic(augmented, self.packed, self.reduce_range).mul_(magnitude)


@contextmanager
def quantized_engine(name: str) -> Iterator[None]:
    """PyTorch's quantised engine set to `name` for the block (it chooses the kernels a weight is packed for)."""
    if name not in torch.backends.quantized.supported_engines:
        raise RuntimeError(f"this PyTorch build lacks the {name} quantised engine")
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


class Int4Linear(PackedLinear):
    """W stored as 4-bit codes in groups along the input, each group with its own scale and offset (asymmetric,
    round to nearest), packed for the CPU kernel."""

    def __init__(self, linear: nn.Linear, group_size: int):
        super().__init__(linear)
        weight = linear.weight.detach().float()
        out_features, in_features = weight.shape
        groups = weight.view(out_features, in_features // group_size, group_size)
        low, high = groups.amin(dim=-1), groups.amax(dim=-1)
        scale = ((high - low) / 15).clamp(min=torch.finfo(torch.float32).tiny)
        codes = torch.round((groups - low[..., None]) / scale[..., None]).clamp(0, 15).to(torch.int32)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            codes.view(out_features, in_features), INT4_INNER_K_TILES
        )
        self.register_buffer("weight", packed)
        # The kernel computes (code - 8) * scale + zero, so the zero point is the group's low end + 8 scales.
        zero = low + 8 * scale
        scales_and_zeros = torch.stack((scale, zero), dim=-1).transpose(0, 1).contiguous()
        self.register_buffer("scales_and_zeros", scales_and_zeros.bfloat16())
        self.group_size = group_size

    def multiply(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.weight, self.group_size, self.scales_and_zeros)


def decoder_linears(module: nn.Module) -> dict[str, tuple[nn.Module, str]]:
    """The linear layers of every decoder layer under `module`, by their parameter path's prefix: (owner, name)."""
    found = {}
    for path, layer in module.named_modules():
        if isinstance(layer, DecoderLayer):
            for part in ("self_attn", "mlp"):
                owner = getattr(layer, part)
                for name, child in owner.named_children():
                    if isinstance(child, nn.Linear):
                        found[f"{path}.{part}.{name}"] = (owner, name)
    return found


def head_linears(talker: nn.Module) -> dict[str, tuple[nn.Module, str]]:
    """The talker's codec head and the code predictor's fifteen heads, as `decoder_linears` gives layers."""
    heads = {"codec_head": (talker, "codec_head")}
    for index in range(len(talker.code_predictor.lm_head)):
        heads[f"code_predictor.lm_head.{index}"] = (talker.code_predictor.lm_head, str(index))
    return heads


def quantize_talker(talker: nn.Module, mode: str) -> str | None:
    """Replace the linear layers of every decoder layer of the talker and its code predictor (after
    `fuse_projections`) by their quantised form; on a CPU the heads too, in int8 whatever the mode (a sixth of a
    one-row int4 step in float32; 8 bits keep the logits close). See `quantize_linears`."""
    targets = [(owner, name, mode) for owner, name in decoder_linears(talker).values()]
    if talker.device.type != "cuda":
        targets += [(owner, name, "int8") for owner, name in head_linears(talker).values()]
    failure = quantize_linears(targets, mode, talker.device, talker.dtype)
    release_unused_codes(talker)  # no dense products here: fbgemm's packed copy is all they use
    return failure


def release_unused_codes(module: nn.Module) -> None:
    """Drop the int8 codes of every W8A8 layer under `module` that never converts them (`converts_codes`): set up
    its prefills first."""
    for layer in module.modules():
        if isinstance(layer, DynamicInt8Linear) and not layer.converts_codes:
            layer.release_codes()


def quantize_linears(
    targets: list[tuple[nn.Module, str, str]], mode: str, device: torch.device, dtype: torch.dtype
) -> str | None:
    """Replace each `owner.name` linear layer by its quantised form in its target mode, one at a time.

    Each quantised layer is checked on a random input against the layer it replaces before it goes in. A layer
    that fails to quantise, to run, or to come close (a kernel this device lacks, a wrong layout) puts every layer
    back as it was, in the model's `dtype`, with one warning: the model runs unquantised rather than not at all.
    Returns None when quantised, else the reason."""
    replaced: list[tuple[nn.Module, str, nn.Module]] = []
    try:
        quantize = _torchao_quantizer(mode) if device.type == "cuda" else _quantized
        for owner, name, target_mode in targets:
            linear = getattr(owner, name)
            quantized = quantize(linear, target_mode)
            _check_quantized(linear, quantized, target_mode, dtype)
            setattr(owner, name, quantized)
            replaced.append((owner, name, linear))
    except ConfigurationError:  # asked for what cannot be (torchao not installed, widths int4 cannot pack)
        raise
    except Exception as exc:  # any failure of the library or its kernels: the model must still run
        reason = f"{mode} failed on {device.type}: {type(exc).__name__}: {exc}"
        log.warning("quantization off: %s; running in %s", reason, str(dtype).removeprefix("torch."))
        for owner, name, linear in replaced:
            setattr(owner, name, linear)
        for owner, name, _ in targets:  # on a CPU they were loaded as stored, to be quantised from there
            getattr(owner, name).to(dtype)
        return reason
    return None


# A quantised layer's output on a random input stays within this relative distance of the float layer's: several
# times what each mode's rounding gives (int8 per channel ~0.5%, fp8 ~3%, int4 in groups ~10%), far below what a
# wrong scale, zero point or layout gives (the size of the output itself).
MAX_RELATIVE_ERROR = {"int8": 0.1, "w8a8": 0.1, "fp8": 0.2, "int4": 0.4}
PROBE_ROWS = (1, 17)  # one stream's step, and a batch that is no multiple of a kernel's tile


@torch.inference_mode()
def _check_quantized(linear: nn.Linear, quantized: nn.Module, mode: str, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    bias = None if linear.bias is None else linear.bias.float()
    for rows in PROBE_ROWS:
        probe = torch.randn(rows, linear.in_features, generator=generator).to(linear.weight.device)
        want = torch.nn.functional.linear(probe, linear.weight.float(), bias)
        got = quantized(probe.to(dtype)).float()
        if got.shape != want.shape:
            raise ValueError(f"output of shape {tuple(got.shape)} instead of {tuple(want.shape)}")
        error = ((got - want).norm() / want.norm().clamp(min=torch.finfo(torch.float32).tiny)).item()
        if not error <= MAX_RELATIVE_ERROR[mode]:  # NaN fails too
            bound = MAX_RELATIVE_ERROR[mode]
            raise ValueError(f"a layer's output is {error:.3g} away from the float layer's (at most {bound})")


def _quantized(linear: nn.Linear, mode: str) -> nn.Module:
    if mode == "int8":
        return Int8Linear(linear)
    if mode == "w8a8":
        return DynamicInt8Linear(linear, reduce_range=not cpu_has_vnni())
    in_features = linear.in_features
    group = next((g for g in INT4_GROUP_SIZES if in_features % g == 0), None)
    if group is None or in_features % (16 * INT4_INNER_K_TILES):
        raise ConfigurationError(
            f"int4 needs layer widths that are multiples of {INT4_GROUP_SIZES[-1]}; this model has {in_features}",
            param="quantize",
        )
    return Int4Linear(linear, group)


def _torchao_quantizer(mode: str) -> Callable[[nn.Linear, str], nn.Module]:
    """CUDA: torchao's weight-only configurations (int8, int4 tinygemm, fp8), one layer (a copy) at a time."""
    try:
        from torchao.quantization import Float8WeightOnlyConfig, Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_
    except ImportError:
        raise ConfigurationError(
            f"quantization {mode} on CUDA needs torchao: pip install 'qwen3-tts-server[cuda]'", param="quantize"
        ) from None
    configs = {
        "int8": Int8WeightOnlyConfig,
        # tinygemm's layout, whose kernel is PyTorch's own (torchao's default layout needs fbgemm's kernels)
        "int4": lambda: Int4WeightOnlyConfig(int4_packing_format="tile_packed_to_4d"),
        "fp8": Float8WeightOnlyConfig,
    }

    def quantize(linear: nn.Linear, layer_mode: str) -> nn.Module:
        holder = nn.Sequential(copy.deepcopy(linear))
        quantize_(holder, configs[layer_mode]())
        return holder[0]

    return quantize
