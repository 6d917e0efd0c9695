"""Our engine serving concurrent streams against the official qwen-tts 0.1.1 serving the same requests one
at a time, side by side in one process on the same random weights (EOS suppressed, equal frames, sampled
with the checkpoint defaults). Run in the oracle environment from the repository root:

    ORACLE/bin/python benchmarks/engine_vs_official.py [--size small] [--frames 64] [--streams 8]

Reports aggregate seconds of audio per wall second at N streams for both, their ratio, time to first
audio at 1 stream (the official package returns audio only when a request is complete), and the longest
stall a joining prefill caused. Writes benchmarks/results/engine_vs_official.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import qwen_tts_oracle_stubs  # noqa: E402,F401  (must precede qwen_tts)
import torch  # noqa: E402
from qwen_tts import Qwen3TTSModel as OfficialModel  # noqa: E402

from qwen3_tts_server.engine.bench import BENCH_TEXT, run_bench  # noqa: E402
from qwen3_tts_server.model.tts_model import Qwen3TTSModel  # noqa: E402
from qwen3_tts_server.testing.test_checkpoint import make_test_model  # noqa: E402


def official_one(model: OfficialModel, frames: int) -> float:
    """Seconds for one complete request (text in, audio out) that generates `frames` frames.

    The pad id is suppressed, so as the stop id it never stops generation: every request runs all its
    frames. (The official post-processing still cuts the returned audio at a sampled EOS code, so the
    decode may cover fewer frames than were generated; the talker work is the same.)"""
    pad_id = model.model.config.talker_config.codec_pad_id
    started = time.perf_counter()
    model.generate_custom_voice(
        BENCH_TEXT, speaker="Serena", language="English", max_new_tokens=frames + 1, eos_token_id=pad_id
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--streams", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    seconds = args.frames * 1920 / 24000
    with tempfile.TemporaryDirectory() as tmp:
        path = make_test_model(Path(tmp) / args.size, size=args.size, model_type="custom_voice", seed=0)
        official = OfficialModel.from_pretrained(str(path), dtype=torch.float32)
        ours = Qwen3TTSModel.load(path)
        official_one(official, 2)  # warm-up
        ours_levels = run_bench(ours, [1, args.streams], args.frames)
        started = time.perf_counter()
        official_times = [official_one(official, args.frames) for _ in range(args.streams)]
        official_wall = time.perf_counter() - started
    official_aggregate = args.streams * seconds / official_wall
    report = {
        "checkpoint": args.size,
        "frames_per_request": args.frames,
        "streams": args.streams,
        "ours": [asdict(level) for level in ours_levels],
        "official_one_at_a_time": {
            "aggregate_rtf": round(official_aggregate, 3),
            "ttfa_ms_1_stream": round(1000 * official_times[0], 1),
            "wall_seconds": round(official_wall, 2),
        },
        "aggregate_ratio": round(ours_levels[1].aggregate_rtf / official_aggregate, 2),
        "ttfa_ratio_1_stream": round(1000 * official_times[0] / ours_levels[0].ttfa_p50_ms, 1),
    }
    print(json.dumps(report, indent=1))
    out = ROOT / "benchmarks" / "results" / "engine_vs_official.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
