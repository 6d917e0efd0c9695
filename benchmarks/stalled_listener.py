"""What a listener who stops reading costs: a live server, a client that reads 1 KiB of a long text's streamed PCM and
then nothing, the engine steps taken in the 4 s after 8 s of that, and the audio waiting for the client when it reads
again (what arrives within 0.3 s). Each STREAM_BUFFER_SECONDS is run with SEND_BUFFER_BYTES at its default and at 0
(the kernel's own send buffer, which grows to MBs), side by side.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/stalled_listener.py [--model DIR] [--buffers 2 30]

Without --model it builds the tiny random-weight checkpoint, which makes audio far faster than real time on a CPU: a
server far ahead of its listener.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path

import httpx

from qwen3_tts_server.config.server import ServerSettings
from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "stalled_listener.json"
TEXT = " ".join(f"Sentence number {n} keeps the line open while the listener takes its time." for n in range(40))
STALLED_SECONDS, WINDOW_SECONDS, RESUMED_SECONDS = 8.0, 4.0, 0.3
PCM_BYTES_A_SECOND = 24000 * 2


def steps(client: httpx.Client) -> int:
    """Engine steps so far, from the step-time histogram's count."""
    found = re.search(r"qwen3_tts_engine_step_seconds_count\{[^}]*\} ([0-9.e+]+)", client.get("/metrics").text)
    return round(float(found.group(1))) if found else 0


async def stall(base: str) -> dict:
    with httpx.Client(base_url=base, timeout=30) as probe:
        async with httpx.AsyncClient(base_url=base, timeout=600) as client:
            body = {"input": TEXT, "voice": "vivian", "response_format": "pcm", "seed": 1}
            async with client.stream("POST", "/v1/audio/speech", json=body) as response:
                pieces = response.aiter_raw(1024)
                await anext(pieces)
                await asyncio.sleep(STALLED_SECONDS)
                before = steps(probe)
                await asyncio.sleep(WINDOW_SECONDS)
                stalled_steps = steps(probe) - before
                health = probe.get("/health").json()
                started, waiting = time.monotonic(), 0
                async for piece in pieces:
                    waiting += len(piece)
                    if time.monotonic() - started > RESUMED_SECONDS:
                        break
    return {
        "segments": int(response.headers["X-Segments"]),
        "steps_while_stalled": stalled_steps,
        "paused_streams": health["paused_streams"],
        "active_streams": health["active_streams"],
        "waiting_mb": round(waiting / 1e6, 2),
        "waiting_audio_seconds": round(waiting / PCM_BYTES_A_SECOND, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint (default: build the tiny random one)")
    parser.add_argument("--buffers", type=float, nargs="+", default=[2.0, 30.0], help="STREAM_BUFFER_SECONDS")
    args = parser.parse_args()
    default_send_buffer = ServerSettings.model_fields["send_buffer_bytes"].default
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "tiny", size="tiny")
        for buffer in args.buffers:
            for send_buffer in (default_send_buffer, 0):
                env = {
                    "STREAM_BUFFER_SECONDS": f"{buffer:g}",
                    "SEND_BUFFER_BYTES": str(send_buffer),
                    "REQUEST_TIMEOUT": "0",
                    "AUDIO_CACHE_MAX": "0",
                    "HUGE_PAGES": "off",
                }
                with live_process("serve", model, "--preload-model", env=env) as live:
                    run = {"stream_buffer_seconds": buffer, "send_buffer_bytes": send_buffer}
                    run |= asyncio.run(stall(live.base))
                print(json.dumps(run))
                runs.append(run)
    OUT.write_text(json.dumps({"model": str(args.model or "tiny (random weights)"), "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
