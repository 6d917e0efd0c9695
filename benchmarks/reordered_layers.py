"""A live pass on a CPU with the recogniser's bfloat16 layers plain and reordered for oneDNN (`model/cpu_linear.py`):
two copies of the same random-weight checkpoint (0.6B by default, w8a8 with bfloat16 activations, the CPU default)
in one process, one loaded as before (plain `nn.Linear` layers and plain kept prefill weights, which oneDNN
reorders on every call), the other as the server loads it. Each copy in turn runs an utterance's live passes
(`IncrementalPasses`, a pass every 2 s of a 10 s clip, each decoding `--tokens`), so that the machine's drift falls
on both. The copy loaded second runs faster whatever its layers (where each lands in memory), so the comparison runs
twice, in a fresh process for each order of loading; the report gives each copy's median encoding (`prepare`),
prefill (`join`) and decode step in each order, the ratios of the two orders together (geometric mean), and whether
both copies gave the same tokens. The decode step is the control: its layers are the same in both copies. Needs a
CPU that multiplies bfloat16 (AVX512-BF16 or AMX).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/reordered_layers.py [--size 0.6b] [--rounds 4]

Writes benchmarks/results/reordered_layers.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from qwen3_tts_server.bench.asr import SAMPLE_RATE, HeldOpen, bench_clips  # noqa: E402
from qwen3_tts_server.model import quantization  # noqa: E402
from qwen3_tts_server.model.asr import loading  # noqa: E402
from qwen3_tts_server.model.asr.streaming import IncrementalPasses  # noqa: E402
from qwen3_tts_server.model.asr.transcriber import Transcriber  # noqa: E402
from qwen3_tts_server.model.cpu_linear import PrepackedLinear  # noqa: E402
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16  # noqa: E402
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "reordered_layers.json"
CHUNK = 2 * SAMPLE_RATE


def load(directory: Path, plain: bool) -> Transcriber:
    if not plain:
        return HeldOpen(loading.load_asr_checkpoint(directory, "cpu", "bfloat16", "w8a8"))
    with (
        mock.patch.object(loading, "prepack_linears", lambda *args, **kwargs: None),
        mock.patch.object(quantization, "operators_failure", lambda dtype: "plain, as before"),
    ):
        return HeldOpen(loading.load_asr_checkpoint(directory, "cpu", "bfloat16", "w8a8"))


@torch.inference_mode()
def utterance(transcriber: Transcriber, wave, tokens: int) -> tuple[dict[str, list[float]], list[list[int]]]:
    """An utterance's passes: each one's times (seconds) and tokens."""
    times: dict[str, list[float]] = {"prepare": [], "join": [], "step": []}
    said = []
    passes = IncrementalPasses(transcriber, "", "English")
    for end in range(CHUNK, len(wave) + 1, CHUNK):
        started = time.perf_counter()
        rest, after = passes.prepare(wave[:end], "")
        prepared = time.perf_counter()
        rows = transcriber.rows(1)
        _, emitted = rows.join(rest, tokens, after=after)
        joined = time.perf_counter()
        steps = []
        while rows.rows:
            step = time.perf_counter()
            emitted += rows.step()
            steps.append(time.perf_counter() - step)
        times["prepare"].append(prepared - started)
        times["join"].append(joined - prepared)
        times["step"].append(statistics.median(steps))
        said.append([token.token for token in emitted])
    return times, said


def measure(directory: Path, order: list[str], rounds: int, tokens: int) -> dict:
    """Both copies, loaded in `order`, running their utterances in turn: medians (ms) and whether the tokens agree."""
    copies = {name: load(directory, plain=name == "plain") for name in order}
    assert not any(isinstance(m, PrepackedLinear) for m in copies["plain"].model.encoder.modules())
    (wave,) = bench_clips(1, 10.0)
    times: dict[str, dict[str, list[float]]] = {name: {"prepare": [], "join": [], "step": []} for name in copies}
    said: dict[str, list[list[int]]] = {}
    for round_ in range(rounds):
        for name, transcriber in copies.items():
            got, said[name] = utterance(transcriber, wave, tokens)
            if round_:  # the first round warms every kernel up
                for part, seconds in got.items():
                    times[name][part] += seconds
    medians = {
        name: {part: round(statistics.median(seconds) * 1000, 1) for part, seconds in parts.items()}
        for name, parts in times.items()
    }
    return {"loaded_first": order[0], "median_ms": medians, "same_tokens": said["plain"] == said["reordered"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="0.6b", choices=["tiny", "0.6b"])
    parser.add_argument("--rounds", type=int, default=4, help="utterances per copy, alternating (the first warms up)")
    parser.add_argument("--tokens", type=int, default=12, help="tokens every pass decodes")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "FIRST"), help=argparse.SUPPRESS)  # one order's run
    args = parser.parse_args()
    torch.set_num_threads(2)
    if args.child:
        directory, first = Path(args.child[0]), args.child[1]
        order = [first, "reordered" if first == "plain" else "plain"]
        args.out.write_text(json.dumps(measure(directory, order, args.rounds, args.tokens)))
        return
    if not cpu_multiplies_bfloat16():
        sys.exit("this CPU emulates bfloat16: its layers are not reordered there (see model/cpu_linear.py)")
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        directory = make_asr_test_model(Path(folder) / "asr", size=args.size, model_type="asr", seed=0)
        for first in ("plain", "reordered"):
            child_out = Path(folder) / f"{first}.json"
            command = [sys.executable, __file__, "--rounds", str(args.rounds), "--tokens", str(args.tokens)]
            subprocess.run([*command, "--out", str(child_out), "--child", str(directory), first], check=True)
            runs.append(json.loads(child_out.read_text()))
    ratios = {
        part: round(
            math.sqrt(math.prod(run["median_ms"]["plain"][part] / run["median_ms"]["reordered"][part] for run in runs)),
            2,
        )
        for part in ("prepare", "join", "step")
    }
    report = {
        "benchmark": "reordered_layers",
        "workload": {
            "size": args.size,
            "precision": "w8a8, bfloat16 activations",
            "utterance_seconds": 10.0,
            "pass_every_seconds": 2.0,
            "tokens_per_pass": args.tokens,
            "rounds": args.rounds,
            "threads": 2,
        },
        "runs": runs,
        "plain_over_reordered": ratios,
    }
    for run in runs:
        print(f"loaded first: {run['loaded_first']}, same tokens: {run['same_tokens']}")
        for name, parts in run["median_ms"].items():
            print(f"  {name:>9}: " + ", ".join(f"{part} {ms} ms" for part, ms in parts.items()))
    print("plain / reordered, both orders: " + ", ".join(f"{part} {ratio}x" for part, ratio in ratios.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
