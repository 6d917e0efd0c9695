"""A speech frame against this machine's memory floor (issue 62): the read bandwidth measured in the same run, each
precision's one-stream frame split as `step_profile.py` splits it (talker, code predictor, sampling, other, codec,
host gap: the parts from the profiled eager step, so they may add up to more than the served one), and frame time
(the served step and the codec's share) / floor. A frame must read the talker's layers and codec head once and the code
predictor's layers fifteen times (and each of its fifteen heads once), so two floors:

- streamed: every weight a frame reads comes from memory (the predictor's fifteen times);
- predictor resident: the predictor stays in the last-level cache across its passes, only the talker is read.

Weights are counted from the checkpoint's tensor shapes; a precision's floor takes each at that precision's width
(float32 4 bytes, bfloat16 2, int8 and w8a8 1, int4 0.5; scales and the embeddings' single rows left out). Each
precision runs in a process of its own.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/frame_roofline.py [--size 0.6b | --model DIR] [--steps 10]
        [--precisions float32 bfloat16 int8 ...]

Writes benchmarks/results/frame_roofline_<size>.json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors import safe_open

from qwen3_tts_server.testing.random_checkpoint import make_test_model

RESULTS = Path(__file__).resolve().parent / "results"
PREDICTOR_PASSES = 15
FRAME_MS = 80.0  # audio a frame holds
PRECISIONS = {  # name: (dtype, quantize, bytes a weight)
    "float32": ("float32", None, 4.0),
    "bfloat16": ("bfloat16", None, 2.0),
    "int8": ("float32", "int8", 1.0),
    "int8, bfloat16 activations": ("bfloat16", "int8", 1.0),
    "w8a8, bfloat16 activations": ("bfloat16", "w8a8", 1.0),
    "int4, bfloat16 activations": ("bfloat16", "int4", 0.5),
}
PARTS = ("talker_ms", "code_predictor_ms", "sampling_ms", "other_ms", "codec_ms_per_step", "host_gap_served_ms")


def read_bandwidth(gib: float = 1.0, runs: int = 7) -> dict:
    """GB/s of summing a buffer far larger than any cache, on the engine's threads: the best and the median run."""
    buffer = torch.ones(int(gib * 2**30) // 4)
    speeds = []
    for _ in range(runs):
        started = time.perf_counter()
        buffer.sum()
        speeds.append(buffer.nbytes / (time.perf_counter() - started) / 1e9)
    speeds.sort()
    return {
        "best_gb_s": round(speeds[-1], 2),
        "median_gb_s": round(speeds[len(speeds) // 2], 2),
        "threads": torch.get_num_threads(),
    }


def weights_read(checkpoint: Path) -> dict:
    """Weights a frame reads, by part, from the checkpoint's tensor shapes (no data loaded)."""
    counts = {"talker": 0, "predictor_pass": 0, "predictor_heads": 0}
    with safe_open(checkpoint / "model.safetensors", "pt") as tensors:
        for name in tensors.keys():  # noqa: SIM118 (a safetensors file is not iterable)
            size = 1
            for dim in tensors.get_slice(name).get_shape():
                size *= dim
            if name.startswith(("talker.model.layers.", "talker.codec_head.")):
                counts["talker"] += size
            elif name.startswith(("talker.code_predictor.model.layers.", "talker.code_predictor.small_to_mtp")):
                counts["predictor_pass"] += size
            elif name.startswith("talker.code_predictor.lm_head."):
                counts["predictor_heads"] += size  # one head a pass: each read once a frame
    return counts


def floors_ms(weights: dict, bytes_a_weight: float, gb_s: float) -> dict:
    talker = (weights["talker"] + weights["predictor_heads"]) * bytes_a_weight
    streamed = talker + PREDICTOR_PASSES * weights["predictor_pass"] * bytes_a_weight
    resident = talker + weights["predictor_pass"] * bytes_a_weight  # read once, then from the cache
    return {"streamed_ms": round(streamed / gb_s / 1e6, 2), "predictor_resident_ms": round(resident / gb_s / 1e6, 2)}


def measure_one(model_dir: Path, precision: str, steps: int) -> dict:
    """In the child: load at `precision`, one stream's frame split (`step_profile.profile_rows`)."""
    from step_profile import profile_rows

    from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel

    dtype, quantize, _ = PRECISIONS[precision]
    model = Qwen3TTSModel.load(model_dir, "cpu", dtype, quantize)
    return profile_rows(model, 1, steps)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def plot(report: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["results"]
    names = [row["precision"] for row in rows]
    figure, axes = plt.subplots(figsize=(10, 5))
    bottom = [0.0] * len(rows)
    for part in PARTS:
        values = [row[part] for row in rows]
        axes.bar(names, values, bottom=bottom, label=part.removesuffix("_ms").removesuffix("_ms_per_step"))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for key, style in (("streamed_ms", "--"), ("predictor_resident_ms", ":")):
        axes.plot(names, [row["floor"][key] for row in rows], "k" + style, marker="o", label=f"floor: {key[:-3]}")
    axes.plot(names, [row["frame_ms"] for row in rows], "rx", markersize=10, label="frame: served step + codec")
    axes.axhline(FRAME_MS, color="red", linewidth=1, label="real time (80 ms a frame)")
    axes.set_ylabel("ms a frame, one stream")
    axes.set_title(f"{report['model']} on {report['cpu']}: {report['bandwidth']['best_gb_s']} GB/s read")
    axes.legend(fontsize=8)
    plt.setp(axes.get_xticklabels(), rotation=15, ha="right", fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="0.6b")
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint directory (default: built for --size)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=list(PRECISIONS))
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a precision measured in this process
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_one(args.model, args.child, args.steps)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model or make_test_model(Path(scratch) / args.size, args.size)
        bandwidth = read_bandwidth()
        weights = weights_read(Path(model_dir))
        report = {"model": str(args.model or f"{args.size} (random weights)"), "cpu": cpu_name()}
        report |= {"cores": os.cpu_count(), "bandwidth": bandwidth, "weights": weights, "results": []}
        for precision in args.precisions:
            command = [sys.executable, __file__, "--child", precision, "--model", str(model_dir)]
            child = subprocess.run(command + ["--steps", str(args.steps)], check=True, capture_output=True, text=True)
            row = {"precision": precision, **json.loads(child.stdout.strip().splitlines()[-1])}
            frame = row["served_ms_per_step"] + row["codec_ms_per_step"]
            floor = floors_ms(weights, PRECISIONS[precision][2], bandwidth["best_gb_s"])
            row |= {"frame_ms": round(frame, 2), "floor": floor, "x_real_time": round(FRAME_MS / frame, 3)}
            row |= {f"frame_over_{key[:-3]}_floor": round(frame / value, 2) for key, value in floor.items()}
            report["results"].append(row)
            print(json.dumps({key: row[key] for key in ("precision", "frame_ms", "x_real_time", "floor")}), flush=True)
    out = RESULTS / f"frame_roofline_{args.size if args.model is None else args.model.name}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, out.with_suffix(".png"))


if __name__ == "__main__":
    main()
