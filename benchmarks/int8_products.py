"""How fast a CPU's int8 products read their weights for one row (issue 62): the speech frame's products are
one-row matrix products over int8 weights, so their pace is the speed at which a kernel reads those weights. Each
kernel multiplies one row by the 0.6B's decoder layer shapes (the fused q/k/v, the output projection, the fused
gate/up, the down projection) over `--layers` layers (24: 377 MB in int8, far more than a cache holds), beside a
plain read of as many bytes (a float32 sum) in the same run:

- w8a8: fbgemm's dynamic int8 product, what the CPU default runs (`quantization.DynamicInt8Linear`);
- int8 weight-only: PyTorch's `_weight_int8pack_mm`, bfloat16 rows (`QUANTIZE=int8`);
- oneDNN's int8 product with 8-bit rows (`onednn::qlinear_pointwise`, the x86 inductor quantiser's);
- int4 weight-only: PyTorch's `_weight_int4pack_mm_for_cpu`, bfloat16 rows (`QUANTIZE=int4`, half the bytes);
- int8 x int8: `torch._int_mm` (the product torchao's int8 dynamic-activation path calls), 8-bit rows;
- with `--inductor`: the products compiled by inductor with max-autotune and freezing, bfloat16 rows;
- bfloat16: a dense product over bfloat16 weights (twice the bytes);
- OpenVINO's CPU plugin on int8-compressed weights, where `openvino` is importable (not a dependency:
  `pip install openvino` beside the project to include it).

GB/s counts the int8 weights a product reads (int4's half byte, bfloat16's two bytes a weight); "frame ms" is the
time a 0.6B frame's products (the talker's 28 layers once, the code predictor's 5 fifteen times) take at that pace.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/int8_products.py [--layers 24] [--rounds 15] [--inductor]

Writes benchmarks/results/int8_products.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from frame_roofline import cpu_name

from qwen3_tts_server.model.quantization import DynamicInt8Linear, Int4Linear

RESULTS = Path(__file__).resolve().parent / "results"
HIDDEN = 1024
SHAPES = ((4096, HIDDEN), (HIDDEN, 2048), (6144, HIDDEN), (HIDDEN, 3072))  # (out, in) of a 0.6B decoder layer
FRAME_LAYERS = 28 + 5 * 15  # the talker's layers once, the code predictor's fifteen times
INT4_GROUP = 128  # what QUANTIZE=int4 takes for these widths
LAYERS = 24  # weights measured: 377 MB in int8, ten times this machine kind's last-level cache


def timed_in_rounds(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds of each call, every call once a round, so that a busy spell of a shared machine falls on all of them
    alike (two untimed rounds first)."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for round_index in range(rounds + 2):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            if round_index >= 2:
                seconds[name].append(time.perf_counter() - started)
    return {name: sorted(times) for name, times in seconds.items()}


def weights(layers: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Distinct int8 weights (out, in) and their per-channel scales, `layers` decoder layers' worth: far more than
    any cache, so every product reads its weights from memory, as a frame does."""
    generator = torch.Generator().manual_seed(0)
    made = []
    for _ in range(layers):
        for out_features, in_features in SHAPES:
            codes = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8, generator=generator)
            made.append((codes, torch.rand(out_features, generator=generator) * 1e-3 + 1e-4))
    return made


def dense_layer(codes: torch.Tensor, scales: torch.Tensor) -> torch.nn.Linear:
    """The float layer the int8 `codes` stand for, what a quantised layer is made from."""
    linear = torch.nn.Linear(codes.shape[1], codes.shape[0], bias=False)
    linear.weight.data = codes.float() * scales[:, None]
    return linear


def kernels(
    layer_weights: list[tuple[torch.Tensor, torch.Tensor]], inductor: bool
) -> dict[str, tuple[Callable[[], object], int]]:
    """Each kernel as a call over every weight with one row, and the bytes its weights occupy."""
    int8_bytes = sum(codes.numel() for codes, _ in layer_weights)
    found: dict[str, tuple[Callable[[], object], int]] = {}

    plain = torch.ones(int8_bytes // 4)  # float32: the sum ATen reads fastest
    found["plain read (a float32 sum of as many bytes)"] = (plain.sum, int8_bytes)

    w8a8 = [
        (DynamicInt8Linear(dense_layer(codes, scales), reduce_range=False), torch.randn(1, codes.shape[1]))
        for codes, scales in layer_weights
    ]
    found["w8a8 (fbgemm, the default)"] = (lambda: [layer.multiply(row) for layer, row in w8a8], int8_bytes)

    weight_only = [
        (codes, scales.bfloat16(), torch.randn(1, codes.shape[1]).bfloat16()) for codes, scales in layer_weights
    ]
    found["int8 weight-only (_weight_int8pack_mm)"] = (
        lambda: [torch._weight_int8pack_mm(row, codes, scales) for codes, scales, row in weight_only],
        int8_bytes,
    )

    zeros = {codes.shape[0]: torch.zeros(codes.shape[0], dtype=torch.long) for codes, _ in layer_weights}
    onednn = [
        (torch.ops.onednn.qlinear_prepack(codes, [1, codes.shape[1]]), scales, zeros[codes.shape[0]], codes.shape[1])
        for codes, scales in layer_weights
    ]
    rows = {n: torch.randint(0, 256, (1, n), dtype=torch.uint8) for _, n in SHAPES}

    def onednn_products() -> list[torch.Tensor]:
        return [
            torch.ops.onednn.qlinear_pointwise(
                rows[width], 1 / 127, 128, packed, scales, zero, None, 1.0, 0, torch.float32, "none", [], ""
            )
            for packed, scales, zero, width in onednn
        ]

    found["int8, 8-bit rows (oneDNN qlinear)"] = (onednn_products, int8_bytes)

    rows8 = {n: torch.randint(-127, 128, (1, n), dtype=torch.int8) for _, n in SHAPES}
    columns = [codes.t() for codes, _ in layer_weights]  # (in, out), each output's weights contiguous
    found["int8 x int8 (torch._int_mm, torchao's W8A8)"] = (
        lambda: [torch._int_mm(rows8[codes.shape[0]], codes) for codes in columns],
        int8_bytes,
    )

    int4 = [
        (Int4Linear(dense_layer(codes, scales), INT4_GROUP), torch.randn(1, codes.shape[1]).bfloat16())
        for codes, scales in layer_weights
    ]
    found[f"int4 weight-only, groups of {INT4_GROUP}"] = (
        lambda: [layer.multiply(row) for layer, row in int4],
        int8_bytes // 2,
    )

    dense = [(codes.bfloat16(), torch.randn(1, codes.shape[1]).bfloat16()) for codes, _ in layer_weights]
    found["bfloat16 dense"] = (lambda: [torch.nn.functional.linear(row, w) for w, row in dense], 2 * int8_bytes)

    if inductor:
        found["int8 weights, inductor max-autotune with freezing"] = (_inductor_kernel(layer_weights), int8_bytes)
    openvino = _openvino_kernel(layer_weights)
    if openvino is not None:
        found["int8 weights (OpenVINO CPU plugin)"] = (openvino, int8_bytes)
    return found


def _inductor_kernel(layer_weights: list[tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], object]:
    """Every product in one module compiled by inductor with max-autotune and freezing (the weights constants, its
    CPU GEMM templates' weight-only int8 path where it chooses them), bfloat16 rows."""
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True

    class Products(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for index, (codes, scales) in enumerate(layer_weights):
                self.register_buffer(f"codes{index}", codes)
                self.register_buffer(f"scales{index}", scales.bfloat16())

        def forward(self, row: torch.Tensor) -> list[torch.Tensor]:
            products = []
            for index in range(len(layer_weights)):
                codes = getattr(self, f"codes{index}")
                weight = codes.to(torch.bfloat16)
                products.append(F.linear(row[:, : codes.shape[1]], weight) * getattr(self, f"scales{index}"))
            return products

    compiled = torch.compile(Products().eval(), mode="max-autotune")
    row = torch.randn(1, max(n for _, n in SHAPES)).bfloat16()
    return lambda: compiled(row)


def _openvino_kernel(layer_weights: list[tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], object] | None:
    """Every product in one OpenVINO model, each weight an int8 constant converted and scaled in the graph (the
    pattern the CPU plugin runs as a compressed-weight product, its rows quantised dynamically), or None without
    `openvino`. The products take the same row and do not feed each other: what is measured is their reading."""
    try:
        import openvino as ov
        import openvino.opset13 as ops
    except ImportError:
        return None

    widths = sorted({codes.shape[1] for codes, _ in layer_weights})
    inputs = {width: ops.parameter([1, width], ov.Type.f32, name=f"row{width}") for width in widths}
    outputs = []
    for codes, scales in layer_weights:
        weight = ops.convert(ops.constant(codes.numpy()), ov.Type.f32)
        weight = ops.multiply(weight, ops.constant(scales[:, None].numpy()))
        outputs.append(ops.matmul(inputs[codes.shape[1]], weight, transpose_a=False, transpose_b=True))
    model = ov.Model(outputs, list(inputs.values()), "products")
    compiled = ov.Core().compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    rows = [torch.randn(1, width).numpy() for width in widths]
    return lambda: request.infer(rows)


def _openvino_version() -> str | None:
    try:
        import openvino
    except ImportError:
        return None
    return openvino.__version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=LAYERS, help="decoder layers' worth of weights")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--inductor", action="store_true", help="also inductor's max-autotune (minutes to compile)")
    parser.add_argument("--out", type=Path, default=RESULTS / "int8_products.json")
    args = parser.parse_args()

    layer_weights = weights(args.layers)
    frame_bytes = FRAME_LAYERS * sum(out_features * in_features for out_features, in_features in SHAPES)
    results = []
    with torch.inference_mode():
        measured = kernels(layer_weights, args.inductor)
        seconds = timed_in_rounds({name: run for name, (run, _) in measured.items()}, args.rounds)
    for name, (_, nbytes) in measured.items():
        best, median = seconds[name][0], seconds[name][len(seconds[name]) // 2]
        gb_s = nbytes / best / 1e9
        per_weight = nbytes / sum(codes.numel() for codes, _ in layer_weights)
        frame_ms = frame_bytes * per_weight / gb_s / 1e6
        results.append(
            {"kernel": name, "best_ms": round(best * 1e3, 2), "median_ms": round(median * 1e3, 2),
             "gb_s": round(gb_s, 1), "frame_ms": round(frame_ms, 1)}
        )  # fmt: skip
        timing = f"{best * 1e3:8.2f} ms (median {median * 1e3:7.2f})"
        print(f"{name:50s} {timing}  {gb_s:5.1f} GB/s  frame {frame_ms:5.1f} ms")
    report = {
        "cpu": cpu_name(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "openvino": _openvino_version(),
        "layers": args.layers,
        "rounds": args.rounds,
        "weights_gb": round(sum(codes.numel() for codes, _ in layer_weights) / 1e9, 3),
        "frame_int8_gb": round(frame_bytes / 1e9, 3),
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
