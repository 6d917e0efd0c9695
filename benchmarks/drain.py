"""SIGTERM under load: what a graceful stop finishes and what it cuts, against a live server.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/drain.py [--model DIR] [--streams 12] [--grace 10]

Half of the streams speak a sentence, half a long text; all are read as fast as they come. Once every stream has
its first audio the server gets SIGTERM. Reported: what the clients saw (finished whole, cut), the server's own
drain line (in flight at the signal, finished within SHUTDOWN_GRACE, cut at its end, seconds), and how long the
process took to exit, with its status. Without --model it builds the `small` random-weight CustomVoice checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
import time
from pathlib import Path

import httpx

from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "drain_small_cpu.json"
SHORT = "Your table is ready."
LONG = "The quarterly report covers revenue, costs and the outlook for the coming year in some detail. " * 8


async def stream(client: httpx.AsyncClient, text: str, seed: int, started: asyncio.Event) -> dict:
    body = {"input": text, "voice": "vivian", "response_format": "pcm", "stream": True, "seed": seed}
    seen = {"text": "short" if text == SHORT else "long", "bytes": 0, "complete": False}
    try:
        async with client.stream("POST", "/v1/audio/speech", json=body) as response:
            async for chunk in response.aiter_raw():
                seen["bytes"] += len(chunk)
                started.set()
        seen["complete"] = True
    except httpx.HTTPError as exc:
        seen["error"] = type(exc).__name__
    started.set()
    seen["ended"] = time.monotonic()
    return seen


async def load(live: LiveProcess, streams: int, grace: float) -> dict:
    async with httpx.AsyncClient(base_url=live.base, timeout=600) as client:
        started = [asyncio.Event() for _ in range(streams)]
        tasks = [
            asyncio.create_task(stream(client, SHORT if n % 2 else LONG, n, event)) for n, event in enumerate(started)
        ]
        await asyncio.gather(*(event.wait() for event in started))
        signalled = time.monotonic()
        live.process.send_signal(signal.SIGTERM)
        seen = await asyncio.gather(*tasks)
        code = await asyncio.to_thread(live.process.wait, grace + 60)
        exited = time.monotonic()
    return {"signalled": signalled, "exit_seconds": round(exited - signalled, 2), "exit_status": code, "seen": seen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint (default: build the small random one)")
    parser.add_argument("--streams", type=int, default=12)
    parser.add_argument("--grace", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "small", size="small")
        env = {"SHUTDOWN_GRACE": str(args.grace), "AUDIO_CACHE_MAX": "0"}
        with live_process("serve", model, "--preload-model", env=env, ready_within=600) as live:
            run = asyncio.run(load(live, args.streams, args.grace))
            records = [json.loads(line) for line in live.log_path.read_text().splitlines() if line.startswith("{")]
    drain = next(record for record in records if record.get("logger") == "qwen3_tts_server.drain")
    seen = run.pop("seen")
    result = {
        "model": str(args.model or "small (random weights, CustomVoice)"),
        "streams": args.streams,
        "grace_seconds": args.grace,
        "clients": {
            kind: {
                "finished": sum(s["complete"] for s in seen if s["text"] == kind),
                "cut": sum(not s["complete"] for s in seen if s["text"] == kind),
            }
            for kind in ("short", "long")
        },
        "server": {key: drain[key] for key in ("in_flight", "finished", "cut", "still_running", "drain_seconds")},
        "exit_seconds": run["exit_seconds"],
        "exit_status": run["exit_status"],
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
