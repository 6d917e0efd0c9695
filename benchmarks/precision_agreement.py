"""How often each precision picks the code float32 picks, frame by frame, on the same checkpoint; and how close
the codec's audio is to float32's for the same codes.

Float32 makes a greedy reference of N frames (EOS suppressed). Each variant is then teacher forced along those
frames: at every frame it sees the reference's past and predicts codebook 0 (talker) and codebooks 1-15 (code
predictor, each given the reference's earlier codebooks); a prediction agrees when its argmax over the audio codes
equals the reference's code. Variants: bfloat16 (the code predictor rotating q/k in float32, this project's
default, and in bfloat16, the official code's way), int8 and int4 weights (QUANTIZE) with float32 and bfloat16
activations, on a CPU w8a8 (int8 weights and activations) with float32 and bfloat16 activations, the compiled step
(TORCH_COMPILE) in float32 and int8, and on CUDA fp8 weights and the code predictor's fused kernels (FUSED_KERNELS)
in float32 and bfloat16. The codec: the reference codes decoded by a bfloat16
codec against float32 (quantisation leaves the codec in the model's dtype), as the signal-to-noise ratio in dB.

    .venv/bin/python benchmarks/precision_agreement.py [--size 0.6b | --model DIR] [--frames 1000]
        [--variants int8 int4] [--device cuda] [--out FILE]

Prints JSON and writes benchmarks/results/precision_agreement_<size>_<device>.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from qwen3_tts_server.bench.agreement import agreement, forced_predictions, greedy_reference, snr_db
from qwen3_tts_server.model.tts.compilation import compile_frame_step
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
# name: (dtype, quantize, compiled, code predictor rotating in float32, code predictor's fused kernels)
VARIANTS = {
    "float32": ("float32", None, False, True, False),  # the reference's own precision: a self-check (1.0)
    "float32_compiled": ("float32", None, True, True, False),
    "bfloat16": ("bfloat16", None, False, True, False),
    "bfloat16_rotary_bfloat16": ("bfloat16", None, False, False, False),
    "int8": ("float32", "int8", False, True, False),
    "int8_compiled": ("float32", "int8", True, True, False),
    "int4": ("float32", "int4", False, True, False),
    "int8_bfloat16": ("bfloat16", "int8", False, True, False),
    "int4_bfloat16": ("bfloat16", "int4", False, True, False),
    "w8a8": ("float32", "w8a8", False, True, False),  # CPU only
    "w8a8_bfloat16": ("bfloat16", "w8a8", False, True, False),  # CPU only
    "fp8": ("bfloat16", "fp8", False, True, False),  # CUDA only
    "float32_fused": ("float32", None, False, True, True),  # CUDA only (Triton's interpreter would take hours)
    "bfloat16_fused": ("bfloat16", None, False, True, True),  # CUDA only
}
CUDA_ONLY = ("fp8", "float32_fused", "bfloat16_fused")
CPU_ONLY = ("w8a8", "w8a8_bfloat16")


def variant(path: Path, name: str, device: str) -> Qwen3TTSModel:
    dtype, quantize, compiled, rotary_float32, _ = VARIANTS[name]
    model = Qwen3TTSModel.load(path, device=device, dtype=dtype, quantize=quantize)
    model.talker.code_predictor.model.rotary_float32 = rotary_float32
    if compiled:
        compile_frame_step(model.talker)
    return model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="0.6b")
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint directory (default: built for --size)")
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="default: every one the device runs")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/precision_agreement_<size>_<device>.json")
    args = parser.parse_args()
    on_cuda = args.device.startswith("cuda")
    variants = args.variants or [name for name in VARIANTS if name not in (CPU_ONLY if on_cuda else CUDA_ONLY)]
    report: dict = {"size": args.size, "device": args.device, "frames": args.frames}
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or make_test_model(Path(tmp) / args.size, size=args.size, seed=0)
        full = Qwen3TTSModel.load(path, device=args.device, dtype="float32")
        started = time.perf_counter()
        reference = greedy_reference(full, args.frames)
        codes = reference.numpy()
        audio = torch.from_numpy(full.decode(codes))
        del full
        for name in variants:
            model = variant(path, name, args.device)
            report[name] = agreement(forced_predictions(model, reference, fused=VARIANTS[name][4]), reference)
            if VARIANTS[name][1] is not None:  # "failed (...)" where the device could not run it: float figures
                report[name]["quantization"] = model.quantization_state
            if name == "bfloat16":
                report["codec_bfloat16_snr_db"] = snr_db(torch.from_numpy(model.decode(codes)), audio)
            print(name, json.dumps(report[name]), flush=True)
            del model
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=1))
    default = ROOT / "benchmarks" / "results" / f"precision_agreement_{args.size}_{args.device.split(':')[0]}.json"
    out = args.out or default
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
