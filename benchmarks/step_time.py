"""Milliseconds per frame step of the generator alone (no codec, no engine), per row count and step mode:
eager (the running rows gathered by index), static (a fixed row bucket, masked), graphs (the static step
replayed from CUDA graphs; CUDA only). Every row runs the checkpoint's default sampling with EOS suppressed,
so each step does the full work. With --profile, the operators of one step in each mode are tabulated
(torch.profiler), to show where a step's time goes.

    .venv/bin/python benchmarks/step_time.py [--size small] [--rows 1 8] [--device cpu] [--dtype float32]
        [--quantize int8|int4] [--compile]

Prints JSON lines and writes benchmarks/results/step_time_<size>_<device>[_<quantize>][_compiled].json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from qwen3_tts_server.bench.streams import bench_request
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
MODES = {"eager": {"static": False}, "static": {"static": True, "graphs": False}, "graphs": {"static": True}}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_time(model: Qwen3TTSModel, rows: int, mode: str, steps: int, profile: bool) -> dict:
    generator = FrameGenerator(model.talker, rows, **MODES[mode])
    generator.capture()
    prompt = model.prompts.build(bench_request(model))
    for seed in range(rows):
        generator.add(prompt, model.sampling(seed=seed), steps + 10, suppress_eos=True)
    for _ in range(5):  # warm-up (and, for graphs, the capture at this span)
        generator.step()
    _sync(model.device)
    started = time.perf_counter()
    for _ in range(steps):
        generator.step()
    _sync(model.device)
    result = {"rows": rows, "mode": mode, "ms_per_step": round(1000 * (time.perf_counter() - started) / steps, 2)}
    if generator.graphs is not None:
        result["graphs_enabled"] = generator.graphs.enabled
    if profile:
        with torch.profiler.profile() as profiler:
            generator.step()
            _sync(model.device)
        sort = "self_cuda_time_total" if model.device.type == "cuda" else "self_cpu_time_total"
        print(profiler.key_averages().table(sort_by=sort, row_limit=15))
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--quantize", default=None, choices=["int8", "int4"])
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = make_test_model(Path(tmp) / args.size, args.size)
        model = Qwen3TTSModel.load(path, args.device, args.dtype, quantize=args.quantize, compile=args.compile)
    modes = ["eager", "static"] + (["graphs"] if model.device.type == "cuda" else [])
    results = []
    for rows in args.rows:
        for mode in modes:
            results.append(step_time(model, rows, mode, args.steps, args.profile))
            print(json.dumps(results[-1]), flush=True)
    report = {"size": args.size, "device": args.device, "dtype": args.dtype, "steps": args.steps, "results": results}
    report |= {"quantize": args.quantize, "compiled": args.compile}
    if model.device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(model.device)
    variant = "".join(f"_{part}" for part in (args.quantize, "compiled" if args.compile else None) if part)
    out = ROOT / "benchmarks" / "results" / f"step_time_{args.size}_{model.device.type}{variant}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
