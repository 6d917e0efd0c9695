"""How often each precision of the recogniser picks the token float32 picks, on the same checkpoint (0.6B by
default) and a fixed set of clips: float32 makes a greedy reference of N tokens per clip (the end of text held
off); each variant is then teacher forced along it (one prefill of the prompt and the reference) and agrees at a
step when its argmax is the reference's token. Variants: bfloat16, int8 and int4 weights (QUANTIZE), the quantised
ones also with bfloat16 activations (DTYPE=bfloat16).

    .venv/bin/python benchmarks/asr_precision_agreement.py [--size 0.6b | --model DIR] [--clips 8] [--seconds 30]
        [--tokens 100] [--variants bfloat16 int8 int4 int8-bfloat16 int4-bfloat16 w8a8 w8a8-bfloat16] [--out FILE]

Prints JSON and writes benchmarks/results/asr_precision_agreement_<size>_cpu.json (or --out).
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
from pathlib import Path

import torch

from qwen3_tts_server.bench.asr import VARIANTS, bench_clips, forced_choices, held_open
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="0.6b", help="random-weight checkpoint size (without --model)")
    parser.add_argument("--model", type=Path, help="a real checkpoint directory instead")
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=100)
    variants = [name for name in VARIANTS if name != "float32"]
    parser.add_argument("--variants", nargs="+", default=variants, choices=list(VARIANTS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    clips = bench_clips(args.clips, args.seconds)
    result: dict = {
        "benchmark": "asr_precision_agreement",
        "workload": f"{args.size} random weights, {args.clips} clips of {args.seconds:g} s, {args.tokens} tokens each",
        "variants": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.model or make_asr_test_model(Path(scratch) / "asr", size=args.size, model_type="asr", seed=0)
        reference_model = Transcriber(load_asr_checkpoint(directory, "cpu", "float32"))
        references = held_open(reference_model, clips, args.tokens).tokens
        self_check = [forced_choices(reference_model, clip, ref) for clip, ref in zip(clips, references, strict=True)]
        del reference_model
        gc.collect()
        result["float32_self_check"] = sum(a == b for s, r in zip(self_check, references, strict=True)
                                           for a, b in zip(s, r, strict=True)) / (args.clips * args.tokens)  # fmt: skip
        for variant in args.variants:
            dtype, quantize = VARIANTS[variant]
            model = Transcriber(load_asr_checkpoint(directory, "cpu", dtype, quantize))
            agree = steps = first_token = 0
            for clip, reference in zip(clips, references, strict=True):
                choices = forced_choices(model, clip, reference)
                agree += sum(a == b for a, b in zip(choices, reference, strict=True))
                steps += len(reference)
                first_token += choices[0] == reference[0]
            result["variants"][variant] = {
                "token_agreement": round(agree / steps, 4),
                "first_token_agreement": round(first_token / len(clips), 4),
                "steps": steps,
            }
            print(variant, result["variants"][variant], flush=True)
            del model
            gc.collect()
    result["torch"] = torch.__version__
    print(json.dumps(result, indent=2))
    out = args.out or ROOT / "benchmarks" / "results" / f"asr_precision_agreement_{args.size}_cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
