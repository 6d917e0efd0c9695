"""Where a frame step's time goes, at each row count: the served step (static, replayed as CUDA graphs on a GPU)
timed whole; the same step run eager under torch.profiler, its device time split between the talker (its
decoder pass), the code predictor (its fifteen passes and their sampling), the sampling of all sixteen codes on
its own, and the rest (embeddings, heads, bookkeeping); the codec's streaming decode per step (8-frame chunks,
the schedule's steady state); and the host's gaps (step time not covered by device work).

On a CPU the "device" figures are the operators' CPU time (there is no separate device), so the gaps read as
the Python and dispatch overhead between them.

    .venv/bin/python benchmarks/step_profile.py [--size small | --model DIR] [--rows 1 64] [--device cuda]
        [--dtype bfloat16] [--steps 30] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.autograd import DeviceType

from qwen3_tts_server.bench.streams import bench_request
from qwen3_tts_server.model.tts import generation
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.random_checkpoint import make_test_model

CHUNK_FRAMES = 8  # the chunk schedule's steady state: each stream decodes 8 frames at a time
REGIONS = ("talker", "code_predictor", "sampling")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _filled(model: Qwen3TTSModel, rows: int, steps: int, graphs: bool) -> FrameGenerator:
    generator = FrameGenerator(model.talker, rows, static=True, graphs=graphs and model.device.type == "cuda")
    generator.capture()
    prompt = model.prompts.build(bench_request(model))
    for seed in range(rows):
        generator.add(prompt, model.sampling(seed=seed), steps + 20, suppress_eos=True)
    for _ in range(5):  # warm-up, and the capture at this span
        generator.step()
    return generator


def _ms_per_step(generator: FrameGenerator, steps: int) -> float:
    _sync(generator.device)
    started = time.perf_counter()
    for _ in range(steps):
        generator.step()
    _sync(generator.device)
    return 1000 * (time.perf_counter() - started) / steps


def _labelled(name: str, function: Callable) -> Callable:
    def run(*args, **kwargs):
        with torch.profiler.record_function(name):
            return function(*args, **kwargs)

    return run


@contextmanager
def _regions(model: Qwen3TTSModel) -> Iterator[None]:
    """Label the step's parts for the profiler (instance attributes over the methods; the module's `choose`)."""
    talker = model.talker
    talker.model.decode = _labelled("talker", talker.model.decode)
    talker.code_predictor.predict = _labelled("code_predictor", talker.code_predictor.predict)
    choose = generation.choose
    generation.choose = _labelled("sampling", choose)
    try:
        yield
    finally:
        del talker.model.decode, talker.code_predictor.predict
        generation.choose = choose


PROFILED_STEPS = 3  # the profiler's events of a 64-row step take seconds to gather: an H100 run ran out of time


def _profiled_step(model: Qwen3TTSModel, generator: FrameGenerator) -> dict:
    """One eager step's time per region and in all, on the device (CUDA) or the CPU, averaged over a few."""
    steps = PROFILED_STEPS
    on_cuda = model.device.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if on_cuda else [])
    with _regions(model), torch.profiler.profile(activities=activities) as profiler:
        for _ in range(steps):
            generator.step()
        _sync(model.device)
    events = profiler.events()

    host_events = [e for e in events if e.device_type == DeviceType.CPU]  # the device's copies of labels left out

    def time_of(event) -> float:  # on CUDA: the kernels the event and its children launched
        return event.device_time_total if on_cuda else event.cpu_time_total

    totals = {name: sum(time_of(e) for e in host_events if e.name == name) / steps / 1000 for name in REGIONS}
    busy = sum(time_of(e) for e in host_events if e.cpu_parent is None) / steps / 1000  # top-level: no overlap
    return {"busy_ms": round(busy, 3)} | {f"{name}_ms": round(value, 3) for name, value in totals.items()}


def _codec_ms_per_step(model: Qwen3TTSModel, rows: int) -> float:
    """The streaming decode of an 8-frame chunk for every row, as the engine batches it, per step."""
    states = [model.codec_state() for _ in range(rows)]
    codes = torch.randint(0, 2048, (rows, CHUNK_FRAMES, model.config.talker.num_code_groups), device=model.device)
    for _ in range(2):  # warm-up: cuDNN picks its algorithms per shape
        model.codec_stream.decode(states, codes)
    _sync(model.device)
    started = time.perf_counter()
    repeats = 3
    for _ in range(repeats):
        model.codec_stream.decode(states, codes)
    _sync(model.device)
    return 1000 * (time.perf_counter() - started) / repeats / CHUNK_FRAMES


@torch.inference_mode()
def profile_rows(model: Qwen3TTSModel, rows: int, steps: int) -> dict:
    served = _filled(model, rows, 2 * steps, graphs=True)
    served_ms = _ms_per_step(served, steps)
    del served
    eager = _filled(model, rows, 3 * steps, graphs=False)
    eager_ms = _ms_per_step(eager, steps)
    parts = _profiled_step(model, eager)
    codec_ms = _codec_ms_per_step(model, rows)
    busy = parts["busy_ms"]
    return {
        "rows": rows,
        "served_step": "graphs" if model.device.type == "cuda" else "static",
        "served_ms_per_step": round(served_ms, 3),
        "eager_static_ms_per_step": round(eager_ms, 3),
        **parts,
        "other_ms": round(busy - parts["talker_ms"] - parts["code_predictor_ms"], 3),
        "codec_ms_per_step": round(codec_ms, 3),
        "host_gap_served_ms": round(max(served_ms - busy, 0.0), 3),
        "host_gap_eager_ms": round(max(eager_ms - busy, 0.0), 3),
        # every row makes one 80 ms frame per step: each stream's speed with the codec's share
        "stream_x_real_time": round(80 / (served_ms + codec_ms), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint directory (default: built for --size)")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or make_test_model(Path(tmp) / args.size, args.size)
        model = Qwen3TTSModel.load(path, args.device, args.dtype)
    report: dict = {"model": str(args.model or args.size), "device": args.device, "dtype": args.dtype}
    report["steps"] = args.steps
    if model.device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(model.device)
    report["results"] = []
    for rows in args.rows:
        report["results"].append(profile_rows(model, rows, args.steps))
        print(json.dumps(report["results"][-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
