"""Time to build a voice-clone prompt from 10 s of reference audio, against reusing a saved one.

    .venv/bin/python benchmarks/clone_prompt_time.py [--sizes tiny 0.6b] [--repeats 3]

For each size: a random-weight Base checkpoint, a 10 s 44.1 kHz stereo WAV reference; the median time of
intake (decode, mix, resample) + speaker embedding + codec encoding, in both modes, and of loading the
saved prompt from disk. Prints JSON lines and writes benchmarks/results/clone_prompt_time.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from qwen3_tts_server.audio.reference import load_reference
from qwen3_tts_server.bench.traffic import reference_wav
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.model.tts.voice_prompt import VoicePrompt
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="+", default=["tiny", "0.6b"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = reference_wav()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            model = Qwen3TTSModel.load(make_test_model(Path(tmp) / size, size=size, model_type="base", seed=0))
            text = "A ten second reference recording for the benchmark."
            model.voice_encoder.encode(load_reference(data), text)  # warm-up
            in_context = median_seconds(
                lambda m=model, t=text: m.voice_encoder.encode(load_reference(data), t), args.repeats
            )
            x_vector = median_seconds(
                lambda m=model: m.voice_encoder.encode(load_reference(data), x_vector_only=True), args.repeats
            )
            intake = median_seconds(lambda: load_reference(data), args.repeats)
            voice = model.voice_encoder.encode(load_reference(data), text)
            voice.save(Path(tmp) / f"voice-{size}")
            reuse = median_seconds(lambda s=size: VoicePrompt.load(Path(tmp) / f"voice-{s}"), 20)
            row = {
                "size": size,
                "reference_seconds": 10.0,
                "intake_ms": round(1000 * intake, 1),
                "in_context_prompt_ms": round(1000 * in_context, 1),
                "x_vector_prompt_ms": round(1000 * x_vector, 1),
                "reuse_saved_prompt_ms": round(1000 * reuse, 2),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
            del model
    out = ROOT / "benchmarks" / "results" / "clone_prompt_time.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"threads": torch.get_num_threads(), "torch": torch.__version__, "python": sys.version.split()[0]}
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
