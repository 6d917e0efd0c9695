"""What batching live sessions' prefills into one call would buy on a CPU (issue 51, item 3), and what it would cost
in exactness: the recogniser's decoder layers (a random-weight checkpoint, 0.6B by default, w8a8 with bfloat16
activations, the CPU default) multiply `--sessions` prefills of `--rows` positions each (a live pass's open block,
prompt end, text prefix and draft: 35 to 65 positions), one session's call after another as the server runs them,
and all sessions' rows in one call per layer. Both of the layers' products are measured: the dense bfloat16 one
(kept weights, reordered for oneDNN) that prefills take, and fbgemm's integer one that decode steps take. Each
reports the milliseconds of the decoder's products for all sessions (median of `--repeats`), the ratio, and whether
every row's bits in the batched call are the bits it has alone: where they are not, batching would let the sessions
beside a caller change its transcript. Only the products are batched here: a prefill's attention, norms and
rotations stay per session in any design, so the ratio bounds the gain from above.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/batched_prefill.py [--size 0.6b] [--sessions 4] [--rows 60]

Writes benchmarks/results/batched_prefill.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from qwen3_tts_server.model.asr.loading import load_asr_checkpoint  # noqa: E402
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16  # noqa: E402
from qwen3_tts_server.model.quantization import DynamicInt8Linear  # noqa: E402
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "batched_prefill.json"
Product = Callable[[DynamicInt8Linear, torch.Tensor], torch.Tensor]


def dense(layer: DynamicInt8Linear, rows: torch.Tensor) -> torch.Tensor:
    """The prefill's product (bfloat16, the kept weights)."""
    return layer.dense(rows)


def integer(layer: DynamicInt8Linear, rows: torch.Tensor) -> torch.Tensor:
    """The decode step's product (fbgemm, every row quantised on its own)."""
    return layer.multiply(rows.float())


def compare(layers: list[DynamicInt8Linear], product: Product, sessions: int, rows: int, repeats: int) -> dict:
    """The decoder's products for `sessions` prefills of `rows` positions: one session's call after another, and
    one call for all: milliseconds (median) and whether each row's bits are the same both ways."""
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(sessions * rows, layer.in_features, generator=generator).bfloat16() for layer in layers]
    alone_ms, together_ms, same = [], [], True
    for repeat in range(repeats + 1):  # the first round warms every kernel up
        started = time.perf_counter()
        alone = [[product(layer, part) for part in x.split(rows)] for layer, x in zip(layers, inputs, strict=True)]
        between = time.perf_counter()
        together = [product(layer, x) for layer, x in zip(layers, inputs, strict=True)]
        ended = time.perf_counter()
        if repeat:
            alone_ms.append((between - started) * 1000)
            together_ms.append((ended - between) * 1000)
        same = same and all(torch.equal(torch.cat(a), t) for a, t in zip(alone, together, strict=True))
    one_by_one, batched = statistics.median(alone_ms), statistics.median(together_ms)
    return {
        "one_by_one_ms": round(one_by_one, 1),
        "batched_ms": round(batched, 1),
        "ratio": round(one_by_one / batched, 2),
        "same_bits": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="0.6b", choices=["tiny", "0.6b"])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--rows", type=int, default=60, help="positions of one session's prefill")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(2)
    if not cpu_multiplies_bfloat16():
        sys.exit("this CPU emulates bfloat16: prefills take fbgemm's product there, batch-invariant already")
    with tempfile.TemporaryDirectory() as folder:
        directory = make_asr_test_model(Path(folder) / "asr", size=args.size, model_type="asr", seed=0)
        model = load_asr_checkpoint(directory, "cpu", "bfloat16", "w8a8")
    layers = [layer for layer in model.decoder.modules() if isinstance(layer, DynamicInt8Linear)]
    products = {
        name: compare(layers, product, args.sessions, args.rows, args.repeats)
        for name, product in (("dense_bfloat16", dense), ("integer_fbgemm", integer))
    }
    report = {
        "benchmark": "batched_prefill",
        "workload": {
            "size": args.size,
            "precision": "w8a8, bfloat16 activations",
            "sessions": args.sessions,
            "rows_per_session": args.rows,
            "layers": len(layers),
            "threads": 2,
        },
        **products,
    }
    for name, got in products.items():
        print(
            f"{name}: {args.sessions} x {args.rows} rows one by one {got['one_by_one_ms']} ms, in one call "
            f"{got['batched_ms']} ms ({got['ratio']}x), same bits: {got['same_bits']}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
