"""Recognition on a CPU with and without HUGE_PAGES: the same random-weight checkpoint (0.6B by default) loaded in
a fresh process per run, its memory left in 4 KiB pages or moved into 2 MiB ones as the server does after a load
(`resources.collapse_into_huge_pages`), then a 30 s clip decoded to 100 tokens alone and four clips together with
the end of text held off (`bench.asr.held_open`, the workload of asr_speed_vs_official.py). Runs alternate off and
on so that the machine's drift falls on both; the report gives each mode's median and their ratio. Then the decode
step alone, two copies of the model in one process stepping in turn, the first collapsed before the second loads,
against the same two copies with neither collapsed (the control: the order of loading alone changes a copy's speed).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/huge_pages.py [--size 0.6b] [--variant w8a8-bfloat16] [--rounds 3]

Writes benchmarks/results/huge_pages.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from qwen3_tts_server.bench.asr import SAMPLE_RATE, VARIANTS, bench_clips, held_open  # noqa: E402
from qwen3_tts_server.model.asr.decoding import GreedyRows  # noqa: E402
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint  # noqa: E402
from qwen3_tts_server.model.asr.transcriber import Transcriber  # noqa: E402
from qwen3_tts_server.resources import collapse_into_huge_pages, huge_page_bytes, huge_pages_mode  # noqa: E402
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "huge_pages.json"
CONCURRENCY = (1, 4)


def one_run(directory: Path, variant: str, huge: bool, seconds: float, tokens: int) -> dict:
    """In this process: load, collapse if `huge`, warm up, then time each concurrency once."""
    torch.set_num_threads(2)
    dtype, quantize = VARIANTS[variant]
    transcriber = Transcriber(load_asr_checkpoint(directory, "cpu", dtype, quantize))
    started = time.perf_counter()
    collapsed = collapse_into_huge_pages().moved if huge else 0
    collapse_seconds = time.perf_counter() - started
    held_open(transcriber, bench_clips(1, 2.0), 4)  # every kernel's first call
    result: dict = {
        "huge_pages": huge,
        "collapsed_gib": round(collapsed / 2**30, 2),
        "collapse_s": round(collapse_seconds, 2),
        "anon_huge_gib": round((huge_page_bytes() or 0) / 2**30, 2),
    }
    for count in CONCURRENCY:
        clips = bench_clips(count, seconds)
        timing = held_open(transcriber, clips, tokens)
        steps = timing.seconds - timing.encode_prefill
        result[f"{count}"] = {
            "seconds": round(timing.seconds, 3),
            "x_real_time": round(count * seconds / timing.seconds, 3),
            "step_ms": round(1000 * steps / (tokens - 1), 1),
        }
    return result


def interleaved_steps(directory: Path, variant: str, collapse: bool, rows: int, positions: int, steps: int) -> dict:
    """In this process: two copies of the model, the first collapsed into huge pages before the second loads (with
    `collapse`; without, the control: the same two copies in 4 KiB pages), their decode steps taken in turn (so the
    machine's drift falls on both) at `rows` rows of `positions` cached positions: each copy's median step."""
    torch.set_num_threads(2)
    dtype, quantize = VARIANTS[variant]
    runners = []
    for copy in range(2):
        model = load_asr_checkpoint(directory, "cpu", dtype, quantize)
        decoding = GreedyRows(model.decoder, model.head, frozenset(), rows)
        generator = torch.Generator().manual_seed(copy)
        for _ in range(rows):
            prompt = torch.randn(positions, model.decoder.norm.weight.shape[0], generator=generator) * 0.1
            decoding.join(prompt, steps + 8)
        for _ in range(3):
            decoding.step()
        runners.append(decoding)
        if copy == 0 and collapse:
            collapse_into_huge_pages()
    times: list[list[float]] = [[], []]
    for index in range(steps):
        for copy in (0, 1) if index % 2 == 0 else (1, 0):
            started = time.perf_counter()
            runners[copy].step()
            times[copy].append(time.perf_counter() - started)
    medians = [1000 * statistics.median(copy_times) for copy_times in times]
    return {
        "first_collapsed": collapse,
        "first_step_ms": round(medians[0], 1),
        "second_step_ms": round(medians[1], 1),
        "second_over_first": round(medians[1] / medians[0], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="0.6b", choices=["tiny", "0.6b"])
    parser.add_argument("--variant", default="w8a8-bfloat16", choices=sorted(VARIANTS))
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each mode, alternating")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--step-rows", type=int, nargs="+", default=[1, 4], help="rows of the interleaved steps")
    parser.add_argument("--child", choices=["off", "on", "steps-off", "steps-on"], help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--directory", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child in ("steps-off", "steps-on"):
        positions = round(args.seconds * 13)  # about a clip's prompt: 13 audio tokens a second
        found = interleaved_steps(args.directory, args.variant, args.child == "steps-on", args.rows, positions, 40)
        print(json.dumps(found))
        return
    if args.child:
        print(json.dumps(one_run(args.directory, args.variant, args.child == "on", args.seconds, args.tokens)))
        return
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as folder:
        directory = make_asr_test_model(Path(folder) / "asr", size=args.size, model_type="asr", seed=0)

        def child(mode: str, *options: str) -> dict:
            """One run in a fresh process: its report, also printed."""
            command = [sys.executable, __file__, "--child", mode, "--directory", str(directory)]
            command += ["--variant", args.variant, "--seconds", str(args.seconds), *options]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            found = json.loads(output.strip().splitlines()[-1])
            print(f"{mode}: {found}", file=sys.stderr, flush=True)
            return found

        for index in range(args.rounds):
            for mode in ("off", "on") if index % 2 == 0 else ("on", "off"):
                runs[mode].append(child(mode, "--tokens", str(args.tokens)))
        steps = [
            {"rows": rows, **child(mode, "--rows", str(rows))}
            for rows in args.step_rows
            for mode in ("steps-on", "steps-off")
        ]
    medians = {
        mode: {
            f"{count}": {key: statistics.median(run[f"{count}"][key] for run in done) for key in done[0][f"{count}"]}
            for count in CONCURRENCY
        }
        for mode, done in runs.items()
    }
    result = {
        "benchmark": "huge_pages",
        "workload": f"{args.size} random weights, {args.variant}, {args.seconds:g} s clips decoded to {args.tokens} "
        f"tokens, 1 and {CONCURRENCY[-1]} at once, 2 threads, a fresh process per run, {args.rounds} runs a mode",
        "kernel_mode": huge_pages_mode(),
        "sample_rate": SAMPLE_RATE,
        "runs": runs,
        "median": medians,
        # two copies in one process, steps in turn; the first collapsed, or neither (the control): how much faster
        # the collapsed copy is, as the ratio with collapse over the control's (which the load order alone sets)
        "interleaved_steps": steps,
        "interleaved_speedup": {
            f"{rows}": round(
                next(s["second_over_first"] for s in steps if s["rows"] == rows and s["first_collapsed"])
                / next(s["second_over_first"] for s in steps if s["rows"] == rows and not s["first_collapsed"]),
                3,
            )
            for rows in args.step_rows
        },
        "on_over_off_x_real_time": {
            f"{count}": round(medians["on"][f"{count}"]["x_real_time"] / medians["off"][f"{count}"]["x_real_time"], 3)
            for count in CONCURRENCY
        },
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
