"""The CPU table: `qwen3-tts-server bench` for every precision (float32, bfloat16, int8, int4, and int8 / int4 with
the compiled step) at 1, 4, 8 and 16 streams on one checkpoint, each in a process of its own (load time and
resident memory are its own), and the official package's speed from the same run.

    .venv/bin/python benchmarks/cpu_precisions.py [--size 0.6b] [--peer official=ORACLE/bin/python]

Prints a Markdown table and writes benchmarks/results/cpu_precisions_<size>.json and .png; a run of some precisions
(`--precisions`) replaces theirs in an existing JSON and keeps the others.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
PRECISIONS = {  # name: bench flags
    "float32": ["--dtype", "float32", "--quantize", "none"],
    "bfloat16": ["--dtype", "bfloat16", "--quantize", "none"],
    "int8": ["--quantize", "int8"],
    "int4": ["--quantize", "int4"],
    "int8 compiled": ["--quantize", "int8", "--compile"],
    "int4 compiled": ["--quantize", "int4", "--compile"],
    "int8, bfloat16 activations": ["--quantize", "int8", "--dtype", "bfloat16"],
    "int4, bfloat16 activations": ["--quantize", "int4", "--dtype", "bfloat16"],
}


def bench(model: Path, flags: list[str], levels: list[int], frames: int, out: Path, peer: str | None) -> dict:
    command = [sys.executable, "-m", "qwen3_tts_server", "bench", "--model", str(model), *flags, "--out", str(out)]
    command += ["--concurrency", *map(str, levels), "--frames", str(frames)]
    if peer:
        command += ["--peer", peer, "--peer-runs", "2"]
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads(out.read_text())


def table(reports: dict[str, dict], levels: list[int]) -> str:
    head = "| precision | ms/frame, 1 stream | TTFA, 1 stream | " + " | ".join(f"{n} streams" for n in levels)
    lines = [head + " | ready | RSS ready |", "|---" * (len(levels) + 5) + "|"]
    for name, report in reports.items():
        rows = {row["concurrency"]: row for row in report["results"]}
        one, meta = rows[levels[0]], report["meta"]
        cells = [f"{80 / one['stream_rtf_p50']:.0f}", f"{one['ttfa_p50_ms']:.0f} ms"]
        cells += [f"{rows[n]['aggregate_rtf']:.2f}x" for n in levels]
        cells += [f"{meta['ready_seconds']:.1f} s", f"{meta['rss_mib_ready']:.0f} MiB"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for peer in next(iter(reports.values())).get("peers", []):
        lines.append(
            f"| official {peer['version']} (one request at a time) | {80 / peer['rtf_p50']:.0f} | "
            f"{peer['ttfa_p50_ms']:.0f} ms | " + " | ".join(f"{peer['rtf_p50']:.2f}x" for _ in levels) + " | | |"
        )
    return "\n".join(lines)


def plot(reports: dict[str, dict], levels: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, report in reports.items():
        axis.plot(levels, [row["aggregate_rtf"] for row in report["results"]], "o-", label=name)
    for peer in next(iter(reports.values())).get("peers", []):
        axis.axhline(peer["rtf_p50"], linestyle=":", color="black", label=f"official {peer['version']}")
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set(xscale="log", xlabel="concurrent streams", ylabel="seconds of audio per second (all streams)")
    axis.set_xticks(levels, [str(n) for n in levels])
    axis.minorticks_off()
    axis.legend()
    axis.set_title("0.6B on this 2-core CPU, by precision")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="0.6b")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=list(PRECISIONS))
    parser.add_argument("--peer", help="NAME=PATH of `bench --peer`, timed in the float32 run")
    args = parser.parse_args()
    results = ROOT / "benchmarks" / "results" / f"cpu_precisions_{args.size}.json"
    reports = json.loads(results.read_text()) if results.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        model = make_test_model(Path(tmp) / args.size, args.size, seed=0)
        for index, name in enumerate(args.precisions):
            out = Path(tmp) / f"{index}.json"
            peer = args.peer if index == 0 else None
            reports[name] = bench(model, PRECISIONS[name], args.levels, args.frames, out, peer)
    results.write_text(json.dumps(reports, indent=1) + "\n")
    plot(reports, args.levels, results.with_name(results.name.replace(".json", ".png")))
    print(table(reports, args.levels))


if __name__ == "__main__":
    main()
