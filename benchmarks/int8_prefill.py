"""The int8 speech recogniser's prefill on this CPU: the whole decoder run over a prompt of N rows with its int8
layers multiplied by the packed kernel, by a float32 product of the dequantised weights, and by a bfloat16 product
(where the CPU has bfloat16 instructions), side by side in one run. It chose `DENSE_FROM_ROWS`
(`model/asr/loading.py`): the row count from which a dense product beats the packed kernel.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/int8_prefill.py [--size 0.6b] [--rows 1 8 16 32 64 128]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16
from qwen3_tts_server.model.quantization import PackedLinear
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "int8_prefill.json"
PATHS = {"packed": (None, None), "float32": (1, None), "bfloat16": (1, torch.bfloat16)}  # (dense from, dtype)


def fastest(run, repeats: int) -> float:
    run()  # its kernels' first call
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


@torch.inference_mode()
def prefill_seconds(decoder, path: str, rows: int, repeats: int) -> float:
    dense_from, dtype = PATHS[path]
    for layer in decoder.modules():
        if isinstance(layer, PackedLinear):
            layer.dense_from_rows, layer.dense_dtype = dense_from, dtype
    hidden = torch.randn(1, rows, decoder.cfg.hidden_size)
    cache = decoder.new_cache(1, max(rows, 16), torch.float32, hidden.device)
    return fastest(lambda: decoder.extend(hidden, cache, slice(0, 1), 0), repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="0.6b", choices=["tiny", "0.6b"])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16, 32, 64, 128])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    paths = [path for path in PATHS if path != "bfloat16" or cpu_multiplies_bfloat16()]
    with tempfile.TemporaryDirectory() as folder:
        directory = make_asr_test_model(Path(folder) / "asr", size=args.size, model_type="asr", seed=0)
        decoder = load_asr_checkpoint(directory, quantize="int8").decoder
        table = []
        for rows in args.rows:
            row = {"rows": rows, **{f"{path}_ms": round(1e3 * prefill_seconds(decoder, path, rows, args.repeats), 1)
                                    for path in paths}}  # fmt: skip
            table.append(row)
            print(json.dumps(row), flush=True)
    result = {"benchmark": "int8_prefill", "size": args.size, "cpu_multiplies_bfloat16": cpu_multiplies_bfloat16(),
              "threads": torch.get_num_threads(), "prefill": table}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
