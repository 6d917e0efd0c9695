"""Per-frame generation time of this project's model against the official qwen-tts 0.1.1, side by side in
one process, on the same random-weight checkpoints: batch 1, greedy, 64 frames (EOS kept from stopping
either run), codec decoding excluded. Run it in the oracle environment from the repository root:

    ORACLE/bin/python benchmarks/frame_time_vs_official.py [--sizes tiny small] [--frames 64] [--repeats 3]
        [--ours float32 bfloat16:w8a8] [--out FILE]

`--ours` times this project's model at each DTYPE[:QUANTIZE] given (default float32), each against the official in
the same interleaved runs. Prints one JSON line per size and precision and writes
benchmarks/results/frame_time_vs_official.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import qwen_tts_oracle_stubs  # noqa: E402,F401  (must precede qwen_tts)
import torch  # noqa: E402
from qwen_tts import Qwen3TTSModel as OfficialModel  # noqa: E402

from qwen3_tts_server.model.tts.prompt import SpeechInput  # noqa: E402
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel  # noqa: E402
from qwen3_tts_server.testing.random_checkpoint import make_test_model  # noqa: E402

TEXT = "The benchmark sentence is long enough to give the talker a realistic prompt to work from."


def time_official(model: OfficialModel, frames: int) -> float:
    codec = model.model.speech_tokenizer
    original = codec.decode
    codec.decode = lambda encoded: ([torch.zeros(1).numpy()] * len(encoded), 24000)
    # The pad id is suppressed, so using it as the stop id lets every run make exactly `frames` frames.
    pad_id = model.model.config.talker_config.codec_pad_id
    try:
        started = time.perf_counter()
        model.generate_custom_voice(
            TEXT,
            speaker="Vivian",
            language="English",
            do_sample=False,
            subtalker_dosample=False,
            max_new_tokens=frames + 1,
            eos_token_id=pad_id,
        )
        return time.perf_counter() - started
    finally:
        codec.decode = original


def time_ours(model: Qwen3TTSModel, frames: int) -> float:
    request = SpeechInput(TEXT, "English", "Vivian")
    started = time.perf_counter()
    result = model.generate([request], model.sampling().greedy(), max_frames=frames, suppress_eos=True)[0]
    elapsed = time.perf_counter() - started
    assert len(result.codes) == frames
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small"])
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ours", nargs="+", default=["float32"], help="DTYPE[:QUANTIZE] of ours, each timed")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "frame_time_vs_official.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = make_test_model(Path(tmp) / size, size=size, model_type="custom_voice", seed=0)
            official = OfficialModel.from_pretrained(str(path), dtype=torch.float32)
            ours = {}
            for precision in args.ours:
                dtype, _, quantize = precision.partition(":")
                ours[precision] = Qwen3TTSModel.load(path, dtype=dtype, quantize=quantize or None)
            time_official(official, 4)  # warm-up
            for model in ours.values():
                time_ours(model, 4)
            official_s: list[float] = []
            ours_s: dict[str, list[float]] = {precision: [] for precision in ours}
            for _ in range(args.repeats):  # interleaved, so machine noise hits each alike
                official_s.append(time_official(official, args.frames))
                for precision, model in ours.items():
                    ours_s[precision].append(time_ours(model, args.frames))
            official_ms = round(1000 * statistics.median(official_s) / args.frames, 2)
            for precision, times in ours_s.items():
                row = {"size": size, "frames": args.frames, "ours": precision, "official_ms_per_frame": official_ms}
                row["ours_ms_per_frame"] = round(1000 * statistics.median(times) / args.frames, 2)
                row["speedup"] = round(row["official_ms_per_frame"] / row["ours_ms_per_frame"], 2)
                print(json.dumps(row), flush=True)
                rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "machine": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    args.out.write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
