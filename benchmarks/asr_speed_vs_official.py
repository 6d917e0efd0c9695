"""Speech recognition speed against the official qwen-asr 0.0.6, side by side in one process on the same
random-weight checkpoint (0.6B by default): clips of 30 s decoded to 100 tokens each with the end of text held off
(every engine does the same work: features, encoder, prompt prefill, 100 greedy steps), one clip alone and eight
together. Ours in float32, bfloat16, int8 and int4 weights; the official package in float32 (its transformers
backend, batching the eight in one generate() call). Run it in the ASR oracle environment from the repository
root (tools/asr_oracle_venv.sh DIR):

    DIR/bin/python benchmarks/asr_speed_vs_official.py [--size 0.6b | --model DIR] [--seconds 30] [--tokens 100]
        [--concurrency 1 8] [--variants float32 bfloat16 int8 int4] [--device cpu | cuda] [--official-dtype D]
        [--huge-pages auto | off] [--out FILE]

On CUDA (the GPU check's step i) ours encodes and prefills the clips together and replays the token step from CUDA
graphs, and the official package runs in bfloat16 unless --official-dtype says otherwise; where it cannot be
imported, ours is measured alone and the report says why.

Prints a table and writes benchmarks/results/asr_speed_vs_official.json (or --out). Real-time factor: seconds of
audio transcribed per second of wall time (8 clips: their total audio over the batch's wall time).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from qwen3_tts_server.bench.asr import SAMPLE_RATE, VARIANTS, bench_clips, held_open  # noqa: E402
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint  # noqa: E402
from qwen3_tts_server.model.asr.transcriber import Transcriber  # noqa: E402
from qwen3_tts_server.resources import collapse_into_huge_pages, huge_pages_usable  # noqa: E402
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model  # noqa: E402


def time_ours(
    directory: Path, variant: str, clips: list, tokens: int, concurrency: list[int], device: str, huge_pages: str
) -> dict:
    dtype, quantize = VARIANTS[variant]
    transcriber = Transcriber(load_asr_checkpoint(directory, device, dtype, quantize))
    if huge_pages == "auto" and device == "cpu" and huge_pages_usable():  # as the server
        collapse_into_huge_pages()
    held_open(transcriber, [clips[0][: SAMPLE_RATE * 2]], 4)  # warm-up: first calls of every kernel
    timings = {}
    for count in concurrency:
        timing = held_open(transcriber, clips[:count], tokens)
        timings[count] = {"seconds": round(timing.seconds, 2), "encode_prefill": round(timing.encode_prefill, 2)}
        print(f"ours {variant} x{count}: {timings[count]}", file=sys.stderr, flush=True)
    del transcriber
    gc.collect()
    return timings


def time_official(directory: Path, clips: list, tokens: int, concurrency: list[int], device: str, dtype: str) -> dict:
    try:
        import nagisa  # noqa: F401 - qwen_asr imports it for its aligner's Japanese words
    except ImportError:  # the GPU check's kit leaves it out (22 MiB): transcription never calls it
        sys.modules["nagisa"] = types.ModuleType("nagisa")
    from qwen_asr import Qwen3ASRModel

    official = Qwen3ASRModel.from_pretrained(str(directory), dtype=getattr(torch, dtype), device_map=device,
                                             max_new_tokens=tokens)  # fmt: skip
    # from_pretrained(dtype=...) leaves the sub-models in config.json's dtype (bfloat16 here, as published): the
    # dtype asked for.
    official.model.to(getattr(torch, dtype))
    generate = official.model.generate
    official.model.generate = lambda **inputs: generate(**inputs, min_new_tokens=tokens)  # no early end of text
    official.transcribe(audio=[(clips[0][: SAMPLE_RATE * 2], SAMPLE_RATE)])  # warm-up
    timings = {}
    for count in concurrency:
        started = time.perf_counter()
        official.transcribe(audio=[(clip, SAMPLE_RATE) for clip in clips[:count]])
        timings[count] = {"seconds": round(time.perf_counter() - started, 2)}
        print(f"official {dtype} x{count}: {timings[count]}", file=sys.stderr, flush=True)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="0.6b", help="random-weight checkpoint size (without --model)")
    parser.add_argument("--model", type=Path, help="a real checkpoint directory instead")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))  # none: official only
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "asr_speed_vs_official.json")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--huge-pages", default="auto", choices=("auto", "off"), help="ours, as HUGE_PAGES")
    parser.add_argument("--official-dtype", choices=("float32", "bfloat16"), help="default: bfloat16 on CUDA")
    args = parser.parse_args()
    official_dtype = args.official_dtype or ("bfloat16" if args.device == "cuda" else "float32")
    clips = bench_clips(max(args.concurrency), args.seconds)
    failures = {}
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.model or make_asr_test_model(Path(scratch) / "asr", size=args.size, model_type="asr", seed=0)
        try:
            official = time_official(directory, clips, args.tokens, args.concurrency, args.device, official_dtype)
        except Exception as exc:  # ours is still measured: the report says why the official package is missing
            failures["official"] = f"{type(exc).__name__}: {exc}"[-2000:]
            official = {}
        ours = {
            variant: time_ours(directory, variant, clips, args.tokens, args.concurrency, args.device, args.huge_pages)
            for variant in args.variants
        }
    rows = []
    for engine, variants in (("official", {official_dtype: official}), ("ours", ours)):
        for variant, timings in variants.items():
            for count, timing in timings.items():
                rtf = count * args.seconds / timing["seconds"]
                speedup = official[count]["seconds"] / timing["seconds"] if count in official else None
                rows.append({"engine": engine, "weights": variant, "clips": count, **timing,
                             "real_time_factor": round(rtf, 2),
                             "vs_official": None if speedup is None else round(speedup, 2)})  # fmt: skip
    result = {
        "benchmark": "asr_speed_vs_official",
        "workload": f"{args.size} random weights, {args.seconds:g} s clips, {args.tokens} tokens each, end held off",
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "official_dtype": official_dtype,
        "huge_pages": args.huge_pages,
        "official_failure": failures.get("official"),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "rows": rows,
    }
    print(f"{'engine':9} {'weights':9} {'clips':>5} {'seconds':>8} {'x real time':>11} {'vs official':>11}")
    for row in rows:
        print(f"{row['engine']:9} {row['weights']:9} {row['clips']:5d} {row['seconds']:8.2f} "
              f"{row['real_time_factor']:11.2f} {row['vs_official'] or float('nan'):11.2f}")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
