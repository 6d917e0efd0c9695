"""How often each precision picks the code float32 picks, frame by frame, on the same checkpoint; and how close
the codec's audio is to float32's for the same codes.

Float32 makes a greedy reference of N frames (EOS suppressed). Each variant is then teacher forced along those
frames: at every frame it sees the reference's past and predicts codebook 0 (talker) and codebooks 1-15 (code
predictor, each given the reference's earlier codebooks); a prediction agrees when its argmax over the audio codes
equals the reference's code. Variants: bfloat16 (the code predictor rotating q/k in float32, this project's
default, and in bfloat16, the official code's way), int8 and int4 weights (QUANTIZE), and the compiled step
(TORCH_COMPILE) in float32 and int8. The codec: the reference codes decoded by a bfloat16 codec against float32
(quantisation leaves the codec in the model's dtype), as the signal-to-noise ratio in dB.

    .venv/bin/python benchmarks/precision_agreement.py [--size 0.6b] [--frames 1000] [--variants int8 int4]

Prints JSON and writes benchmarks/results/precision_agreement_<size>_<device>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from qwen3_tts_server.bench.streams import bench_request
from qwen3_tts_server.model.compilation import compile_frame_step
from qwen3_tts_server.model.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
AUDIO_CODES = 2048  # codebook entries; the codec vocabulary above them holds control tokens
# name: (dtype, quantize, compiled, code predictor rotating in float32)
VARIANTS = {
    "float32": ("float32", None, False, True),  # the reference's own precision: a self-check (1.0)
    "float32_compiled": ("float32", None, True, True),
    "bfloat16": ("bfloat16", None, False, True),
    "bfloat16_rotary_bfloat16": ("bfloat16", None, False, False),
    "int8": ("float32", "int8", False, True),
    "int8_compiled": ("float32", "int8", True, True),
    "int4": ("float32", "int4", False, True),
}


@torch.inference_mode()
def forced_predictions(model: Qwen3TTSModel, reference: torch.Tensor) -> torch.Tensor:
    """Teacher forced along `reference` (frames, groups): this model's argmax for every code, same shape."""
    talker, device, dtype = model.talker, model.device, model.dtype
    prompt = model.prompts.build(bench_request(model))
    frames = reference.shape[0]
    cache = talker.new_cache(1, prompt.prefill.shape[0] + frames + 1, dtype, device)
    hidden = talker.model.prefill(prompt.prefill[None].to(device, dtype), cache, slice(0, 1))[:, -1]
    reference = reference.to(device)
    predicted = torch.empty_like(reference)
    for t in range(frames):
        frame = reference[t]
        predicted[t, 0] = talker.codec_head(hidden)[0, :AUDIO_CODES].argmax()
        groups = iter(range(1, reference.shape[1]))

        def pick(logits: torch.Tensor, t: int = t, groups=groups) -> torch.Tensor:
            group = next(groups)
            predicted[t, group] = logits[0].argmax()
            return reference[t, group][None]

        talker.code_predictor.predict(hidden[:, None], talker.embed_codec(frame[None, :1]), pick)
        text = prompt.trailing[t] if t < prompt.trailing.shape[0] else prompt.pad
        inputs = talker.frame_embedding(frame[None]) + text.to(device, dtype)
        hidden = talker.model.decode(inputs, cache, slice(0, 1), span=cache.lengths[0] + 1)[:, 0]
        cache.advance(slice(0, 1), torch.ones(1, dtype=torch.long, device=device), [0])
    return predicted.cpu()


def agreement(predicted: torch.Tensor, reference: torch.Tensor) -> dict:
    same = predicted == reference
    return {
        "codebook0": round(same[:, 0].float().mean().item(), 4),
        "codebooks1_15": round(same[:, 1:].float().mean().item(), 4),
        "all_codes": round(same.float().mean().item(), 4),
        "whole_frames": round(same.all(dim=1).float().mean().item(), 4),
        "per_codebook": [round(value, 4) for value in same.float().mean(dim=0).tolist()],
    }


def snr_db(signal: torch.Tensor, reference: torch.Tensor) -> float:
    noise = (signal - reference).pow(2).sum().item()
    return math.inf if noise == 0 else round(10 * math.log10(reference.pow(2).sum().item() / noise), 1)


def variant(path: Path, name: str, device: str) -> Qwen3TTSModel:
    dtype, quantize, compiled, rotary_float32 = VARIANTS[name]
    model = Qwen3TTSModel.load(path, device=device, dtype=dtype, quantize=quantize)
    model.talker.code_predictor.model.rotary_float32 = rotary_float32
    if compiled:
        compile_frame_step(model.talker)
    return model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="0.6b")
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    report: dict = {"size": args.size, "device": args.device, "frames": args.frames}
    with tempfile.TemporaryDirectory() as tmp:
        path = make_test_model(Path(tmp) / args.size, size=args.size, seed=0)
        full = Qwen3TTSModel.load(path, device=args.device, dtype="float32")
        started = time.perf_counter()
        greedy = full.sampling(repetition_penalty=1.0).greedy()  # plain argmax, as the forced predictions
        codes = full.generate([bench_request(full)], greedy, max_frames=args.frames, suppress_eos=True)[0].codes
        reference = torch.from_numpy(codes)
        audio = torch.from_numpy(full.decode(codes))
        del full
        for name in args.variants:
            model = variant(path, name, args.device)
            report[name] = agreement(forced_predictions(model, reference), reference)
            if name == "bfloat16":
                report["codec_bfloat16_snr_db"] = snr_db(torch.from_numpy(model.decode(codes)), audio)
            print(name, json.dumps(report[name]), flush=True)
            del model
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=1))
    out = ROOT / "benchmarks" / "results" / f"precision_agreement_{args.size}_{args.device.split(':')[0]}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
