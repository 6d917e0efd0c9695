"""What word timestamps cost synthesis: the same requests with and without them, in one run, on one live server
hosting a speech model and a ForcedAligner.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/timestamps_cost.py [--size tiny|0.6b] [--runs 6] [--concurrency 1 4]

Each request is POST /v1/audio/speech with stream_format sse and a seed, timestamps off then on, the two modes
alternating so that the machine's drift falls on both. Measured per mode: the first audio (from sending to the
first `speech.audio.delta`) and the real-time factor (seconds of audio over the seconds to its last piece, per
request). With
timestamps on, each segment's `speech.words` lag: from the moment its audio has all arrived (the received audio
reaching the segment's end) to its words, as a share of the segment's own duration (the goal: below 1, the words
arrive before the segment has played). Random-weight checkpoints of the real architecture unless --model and
--aligner name real ones.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model
from qwen3_tts_server.testing.random_checkpoint import make_test_model

TEXT = "Thanks for calling. Your order shipped this morning, and it should arrive on Friday. Anything else?"
OUT = Path(__file__).resolve().parent / "results" / "timestamps_cost.json"
RATE = 24000


async def one_request(http: httpx.AsyncClient, seed: int, timestamps: bool) -> dict:
    body = {"input": TEXT, "voice": "ryan", "response_format": "pcm", "stream_format": "sse", "seed": seed}
    body |= {"timestamps": True} if timestamps else {}
    started = time.perf_counter()
    first_audio, received, reached = None, 0.0, []  # reached: (audio seconds received, when)
    lags = []
    async with http.stream("POST", "/v1/audio/speech", json=body) as answer:
        async for line in answer.aiter_lines():
            if not line.startswith("data: "):
                continue
            event, now = json.loads(line[6:]), time.perf_counter()
            if event["type"] == "speech.audio.delta":
                first_audio = first_audio or now - started
                received += len(base64.b64decode(event["audio"])) / 2 / RATE
                reached.append((received, now))
            elif event["type"] == "speech.words":
                played = next(when for seconds, when in reached if seconds >= event["end"] - 1e-3)
                duration = event["end"] - event["start"]
                lags.append({"seconds": now - played, "of_segment": (now - played) / duration if duration else 0.0})
    last_audio = reached[-1][1] - started
    return {"first_audio": first_audio, "rtf": received / last_audio, "audio": received, "lags": lags}


async def measure(base: str, runs: int, concurrency: int) -> dict:
    async with httpx.AsyncClient(base_url=base, timeout=3600) as http:
        await one_request(http, 0, True)  # warm-up: the aligner loads on the first request for timestamps
        results: dict[str, list[dict]] = {"off": [], "on": []}
        for run in range(runs):
            for mode in ("off", "on") if run % 2 == 0 else ("on", "off"):
                seeds = range(run * concurrency + 1, (run + 1) * concurrency + 1)
                results[mode] += await asyncio.gather(*(one_request(http, seed, mode == "on") for seed in seeds))
    return results


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarise(rows: list[dict]) -> dict:
    lags = [lag for row in rows for lag in row["lags"]]
    summary = {
        "first_audio_p50_ms": round(1000 * statistics.median(r["first_audio"] for r in rows), 1),
        "first_audio_p95_ms": round(1000 * p([r["first_audio"] for r in rows], 0.95), 1),
        "rtf_median": round(statistics.median(r["rtf"] for r in rows), 3),
        "audio_seconds": round(sum(r["audio"] for r in rows), 2),
    }
    if lags:
        summary |= {
            "segments_timed": len(lags),
            "words_lag_p95_ms": round(1000 * p([lag["seconds"] for lag in lags], 0.95), 1),
            "words_lag_max_share_of_segment": round(max(lag["of_segment"] for lag in lags), 3),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="tiny", choices=["tiny", "0.6b"], help="random-weight checkpoints' size")
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint (default: random weights)")
    parser.add_argument("--aligner", type=Path, help="a ForcedAligner checkpoint (default: random weights)")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--max-frames", type=int, default=150, help="MAX_REQUEST_FRAMES (random weights may not stop)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    report: dict = {"meta": {"size": args.size, "runs": args.runs, "text": TEXT, "max_frames": args.max_frames}}
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "speech", size=args.size, model_type="custom_voice")
        aligner = args.aligner or make_asr_test_model(Path(scratch) / "aligner", args.size, "forced_aligner")
        # no output cache: a request must not replay another mode's audio of the same seed
        env = {"MAX_REQUEST_FRAMES": str(args.max_frames), "IDLE_TIMEOUT": "0", "AUDIO_CACHE_MAX": "0"}
        with live_process(
            "serve", model, "--model", str(aligner), "--preload-model", env=env, ready_within=900
        ) as live:
            for concurrency in args.concurrency:
                rows = asyncio.run(measure(live.base, args.runs, concurrency))
                report[f"concurrency_{concurrency}"] = {mode: summarise(rows[mode]) for mode in rows}
    heading = f"{'streams':>8} {'mode':>4} {'first audio p50/p95 ms':>24} {'RTF':>7} {'words lag p95 ms':>17}"
    print(heading + f" {'max share':>10}")
    for concurrency in args.concurrency:
        for mode, row in report[f"concurrency_{concurrency}"].items():
            first = f"{row['first_audio_p50_ms']:.0f} / {row['first_audio_p95_ms']:.0f}"
            lag = f"{row['words_lag_p95_ms']:.0f}" if "words_lag_p95_ms" in row else "-"
            share = f"{row['words_lag_max_share_of_segment']:.2f}" if "words_lag_p95_ms" in row else "-"
            print(f"{concurrency:>8} {mode:>4} {first:>24} {row['rtf_median']:>7.3f} {lag:>17} {share:>10}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
