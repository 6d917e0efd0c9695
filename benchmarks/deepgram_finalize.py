"""Deepgram's live socket on this CPU (issue 63): how soon a `Finalize` is answered with its final, against one pass.

Each utterance (a sentence spoken by espeak-ng) is sent at real time in 100 ms pieces over `WS /v1/listen` (no
endpointing: only `Finalize` ends it, as Pipecat's agents end a turn), then `Finalize`. Figures, over the
utterances (min / median / max):
- interim latency: from the last sample of each second of audio sent to its interim result (one pass of the
  streaming algorithm over the utterance so far, as the engine runs it);
- Finalize latency: from `Finalize` (sent at once after the last sample) to the final marked `from_finalize` (the
  tail's pass);
- the goal: Finalize latency <= 300 ms + one pass (the median interim latency);
- the interim cadence: audio seconds between interim results (the goal: at most 1 s).

The model: a random-weight Qwen3-ASR of `--size` (tiny: what the tests use; 0.6b: the real size), served by
`qwen3-tts-server serve` with its defaults for this CPU.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/deepgram_finalize.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
from websockets.asyncio.client import connect

from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model

ROOT = Path(__file__).resolve().parents[1]
RATE = 16000
PIECE = RATE // 10  # samples a message: 100 ms
QUERY = "model=nova-3&encoding=linear16&sample_rate=16000&interim_results=true&endpointing=false&language=en"
SENTENCES = [
    "Thank you for calling, how can I help you today?",
    "I would like to check the status of my order, please.",
    "It was placed last Tuesday and it has not arrived yet.",
    "Could you tell me the order number printed on the receipt?",
    "The parcel left our warehouse this morning and should arrive tomorrow.",
]


def spoken(text: str, folder: Path) -> np.ndarray:
    path = folder / "sentence.wav"
    subprocess.run(["espeak-ng", "-s", "160", "-w", str(path), text], check=True)
    samples, rate = sf.read(path, dtype="float32")
    return soxr.resample(samples, rate, RATE).astype(np.float32)


async def one_utterance(url: str, wave: np.ndarray) -> dict:
    """Send `wave` at real time, then `Finalize`: the latencies and the interims' audio offsets."""
    audio = (np.clip(wave, -1, 1) * 32767).astype("<i2").tobytes()
    sent_at: list[tuple[float, float]] = []  # (audio seconds sent so far, when)
    received: list[tuple[float, dict]] = []
    async with connect(url) as ws:

        async def listen() -> None:
            async for message in ws:
                received.append((time.perf_counter(), json.loads(message)))
                if received[-1][1].get("from_finalize"):
                    return

        listening = asyncio.create_task(listen())
        start = time.perf_counter()
        for offset in range(0, len(wave), PIECE):
            await asyncio.sleep(max(0.0, start + offset / RATE - time.perf_counter()))
            await ws.send(audio[2 * offset : 2 * (offset + PIECE)])
            sent_at.append((min(offset + PIECE, len(wave)) / RATE, time.perf_counter()))
        finalize_at = time.perf_counter()
        await ws.send(json.dumps({"type": "Finalize"}))
        await asyncio.wait_for(listening, 120)
        await ws.send(json.dumps({"type": "CloseStream"}))
    interims = [
        (when, message) for when, message in received if message["type"] == "Results" and not message["is_final"]
    ]
    latencies = []
    for when, message in interims:
        heard = message["start"] + message["duration"]
        sent = next(at for seconds, at in sent_at if seconds >= heard - 1e-6)
        latencies.append(when - sent)
    heard = [message["start"] + message["duration"] for _, message in interims]
    return {
        "seconds": len(wave) / RATE,
        "interim_latency": latencies,
        "interim_every": np.diff([0.0, *heard]).tolist(),
        "finalize_latency": received[-1][0] - finalize_at,
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=("tiny", "0.6b", "1.7b"))
    parser.add_argument("--rounds", type=int, default=2, help="times each sentence is sent")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        model = make_asr_test_model(folder / "asr", args.size)
        waves = [spoken(text, folder) for text in SENTENCES]
        env = {"HF_HUB_OFFLINE": "1", "IDLE_TIMEOUT": "0"}
        with live_process("serve", model, "--preload-model", env=env, ready_within=600) as live:
            url = live.base.replace("http://", "ws://") + "/v1/listen?" + QUERY
            runs = [asyncio.run(one_utterance(url, wave)) for _ in range(args.rounds) for wave in waves]
    one_pass = spread([latency for run in runs for latency in run["interim_latency"]])
    finalize = spread([run["finalize_latency"] for run in runs])
    result = {
        "size": args.size,
        "utterances": len(runs),
        "utterance_seconds": spread([run["seconds"] for run in runs]),
        "interim_latency_s": one_pass,
        "finalize_latency_s": finalize,
        "finalize_goal_s": 0.3 + one_pass["median"],
        "finalize_met": finalize["median"] <= 0.3 + one_pass["median"],
        "interim_every_s": spread([gap for run in runs for gap in run["interim_every"]]),
    }
    print(json.dumps(result, indent=2))
    out = args.out or ROOT / "benchmarks" / "results" / f"deepgram_finalize_{args.size}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
