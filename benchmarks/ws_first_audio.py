"""Time from the first WebSocket text delta to the first audio, against a live server on loopback.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ws_first_audio.py [--model DIR] [--runs 10] [--token-rate 30]

Text arrives as an LLM would send it: word pieces at --token-rate per second. Measured per run: from sending
the first `input_text.append` to the first binary audio frame, and to the `segment.start` event before it
(the segment is released at the first clause, then the engine's prefill and first frame decide the rest).
A sentence sent whole (`input_text`) is measured too, for comparison. Each run cancels once audio arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

from qwen3_tts_server.testing.live_server import live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model

TEXT = "Sure, I can help with that. The store opens at 9 and closes at 17:30 on weekdays."
OUT = Path(__file__).resolve().parent / "results" / "ws_first_audio.json"


def pieces(text: str) -> list[str]:
    """Word pieces as an LLM streams them: each word with its leading space, punctuation on its own."""
    out = []
    for word in text.split(" "):
        core = word.rstrip(",.")
        out += [(" " if out else "") + core] + list(word[len(core) :])
    return out


async def first_audio(ws: ClientConnection, started: float) -> tuple[float, float]:
    """(seconds to segment.start, seconds to the first audio frame) from `started`."""
    segment_start = None
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            return segment_start, time.perf_counter() - started
        if json.loads(message)["type"] == "segment.start" and segment_start is None:
            segment_start = time.perf_counter() - started


async def run_once(url: str, incremental: bool, token_rate: float, seed: int) -> tuple[float, float]:
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "session.update", "voice": "vivian", "seed": seed}))
        await ws.recv()  # session.updated
        started = time.perf_counter()
        if incremental:
            sender = asyncio.create_task(send_pieces(ws, token_rate))
        else:
            await ws.send(json.dumps({"type": "input_text", "text": TEXT}))
        result = await first_audio(ws, started)
        if incremental:
            sender.cancel()
        await ws.send(json.dumps({"type": "cancel"}))
        return result


async def send_pieces(ws: ClientConnection, token_rate: float) -> None:
    for piece in pieces(TEXT):
        await ws.send(json.dumps({"type": "input_text.append", "text": piece}))
        await asyncio.sleep(1 / token_rate)
    await ws.send(json.dumps({"type": "input_text.commit"}))


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(1000 * statistics.median(ordered), 1), "p95_ms": round(1000 * p95, 1)}


async def measure(url: str, runs: int, token_rate: float) -> dict:
    await run_once(url, True, token_rate, 0)  # warm-up
    results = {}
    for name, incremental in (("incremental", True), ("whole", False)):
        timings = [await run_once(url, incremental, token_rate, seed) for seed in range(1, runs + 1)]
        results[name] = {
            "to_segment_start": summary([t[0] for t in timings]),
            "to_first_audio": summary([t[1] for t in timings]),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="CustomVoice checkpoint (default: a random-weight tiny one)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--token-rate", type=float, default=30.0, help="word pieces per second")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "tiny", size="tiny", model_type="custom_voice")
        with live_server(model) as base:
            results = asyncio.run(
                measure(base.replace("http", "ws", 1) + "/v1/audio/speech/ws", args.runs, args.token_rate)
            )
    first_clause = "Sure, I can help with that."
    print(f"first clause {first_clause!r}: {len(pieces(first_clause))} pieces at {args.token_rate:g}/s")
    print(f"{'text sent':<13}{'to segment.start p50/p95 ms':>30}{'to first audio p50/p95 ms':>30}")
    for name, row in results.items():
        start, audio = row["to_segment_start"], row["to_first_audio"]
        to_start = f"{start['p50_ms']:.1f} / {start['p95_ms']:.1f}"
        print(f"{name:<13}{to_start:>30}{audio['p50_ms']:>21.1f} / {audio['p95_ms']:.1f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = {"runs": args.runs, "token_rate": args.token_rate, "model": str(args.model or "tiny (random weights)")}
    OUT.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
