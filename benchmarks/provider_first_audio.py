"""First audio over the other providers' speech sockets against our own, side by side on one live server (issue 63).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/provider_first_audio.py [--size tiny|0.6b] [--rounds 15]

Each round opens one socket of each protocol, in a rotating order, sends the same sentence whole in one message
and times from that message to the first audio: our `/v1/audio/speech/ws` (`input_text`, the first binary frame),
Cartesia's `/tts/websocket` (a generation with `continue: false`, the first `chunk`), Deepgram's `/v1/speak`
(`Speak` then `Flush`, the first binary frame). The goal: each within 10% of ours (median against median).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from websockets.asyncio.client import connect

from qwen3_tts_server.testing.live_server import live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model

TEXT = "Sure, I can help with that. The store opens at nine and closes at half past five on weekdays."
VOICE = "vivian"
OUT = Path(__file__).resolve().parent / "results"


async def ours(base: str) -> float:
    async with connect(base + "/v1/audio/speech/ws") as ws:
        await ws.send(json.dumps({"type": "session.update", "voice": VOICE}))
        await ws.recv()  # session.updated
        started = time.perf_counter()
        await ws.send(json.dumps({"type": "input_text", "text": TEXT}))
        while not isinstance(await ws.recv(), bytes):
            pass
        return time.perf_counter() - started


async def cartesia(base: str) -> float:
    async with connect(base + "/tts/websocket?cartesia_version=2025-04-16") as ws:
        message = {
            "model_id": "sonic-2",
            "voice": {"mode": "id", "id": VOICE},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
            "transcript": TEXT,
            "context_id": "first",
            "continue": False,
        }
        started = time.perf_counter()
        await ws.send(json.dumps(message))
        while json.loads(await ws.recv())["type"] != "chunk":
            pass
        return time.perf_counter() - started


async def deepgram(base: str) -> float:
    async with connect(base + f"/v1/speak?model={VOICE}&encoding=linear16&sample_rate=24000") as ws:
        await ws.recv()  # Metadata
        started = time.perf_counter()
        await ws.send(json.dumps({"type": "Speak", "text": TEXT}))
        await ws.send(json.dumps({"type": "Flush"}))
        while not isinstance(await ws.recv(), bytes):
            pass
        return time.perf_counter() - started


PROTOCOLS: dict[str, Callable[[str], Awaitable[float]]] = {"ours": ours, "cartesia": cartesia, "deepgram": deepgram}


def spread(values: list[float]) -> dict[str, float]:
    return {
        name: round(1000 * value, 1)
        for name, value in (("min", min(values)), ("median", statistics.median(values)), ("max", max(values)))
    }


async def measure(base: str, rounds: int) -> dict[str, list[float]]:
    names = list(PROTOCOLS)
    for name in names:  # warm-up
        await PROTOCOLS[name](base)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            times[name].append(await PROTOCOLS[name](base))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="tiny", choices=("tiny", "0.6b"))
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = make_test_model(Path(scratch) / "model", size=args.size, model_type="custom_voice")
        with live_server(model) as base:
            times = asyncio.run(measure(base.replace("http", "ws", 1), args.rounds))
    ms = {name: spread(values) for name, values in times.items()}
    reference = ms["ours"]["median"]
    ratios = {name: round(row["median"] / reference, 3) for name, row in ms.items()}
    print(f"{'socket':<10}{'first audio ms min / median / max':>36}{'median / ours':>16}")
    for name, row in ms.items():
        print(f"{name:<10}{row['min']:>16.1f} / {row['median']:.1f} / {row['max']:.1f}{ratios[name]:>16.3f}")
    result = {"size": args.size, "rounds": args.rounds, "first_audio_ms": ms, "median_over_ours": ratios}
    result["within_10_percent"] = {name: ratio <= 1.1 for name, ratio in ratios.items() if name != "ours"}
    out = OUT / f"provider_first_audio_{args.size}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
