"""Speech through the server on a CPU, as a user hears it (issue 62's goals): a server per precision, each started
with `serve`'s settings (its defaults, or DTYPE and QUANTIZE set), then one stream and four streams at once, each a
seeded raw PCM stream (POST /v1/audio/speech, `stream: true`) read whole. Reported per precision and stream count:
each stream's first audio and its speed (seconds of audio / seconds from the request to its last byte), the slowest
stream's, and the streams' audio per second in all.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/served_speech_cpu.py [--size 0.6b | --model DIR] [--frames 100]
        [--streams 1 4] [--precisions default float32 ...] [--out FILE]

Writes benchmarks/results/served_speech_cpu_<size>.json (or --out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from frame_roofline import cpu_name

from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

RESULTS = Path(__file__).resolve().parent / "results"
PRECISIONS = {  # name: the server's environment (the default: none set, as a user starts it)
    "default": {"QUANTIZE": "auto", "DTYPE": "auto"},
    "float32": {"QUANTIZE": "none", "DTYPE": "float32"},  # the default before issue 62
    "bfloat16": {"QUANTIZE": "none", "DTYPE": "bfloat16"},
    "w8a8, float32 activations": {"QUANTIZE": "w8a8", "DTYPE": "float32"},
    # the code predictor's passes layer by layer, as before they were traced (TRACED_PREDICTOR's default: auto)
    "default, predictor layer by layer": {"QUANTIZE": "auto", "DTYPE": "auto", "TRACED_PREDICTOR": "off"},
    "float32, predictor layer by layer": {"QUANTIZE": "none", "DTYPE": "float32", "TRACED_PREDICTOR": "off"},
}
SAMPLE_RATE, BYTES_PER_SAMPLE = 24000, 2
TEXT = (
    "The quick brown fox jumps over the lazy dog, and then it runs far away across the green hills until the sun "
    "goes down behind the old mill by the river."
)


async def stream_one(client: httpx.AsyncClient, seed: int) -> dict:
    body = {"model": "tts-1", "input": TEXT, "voice": "ryan", "response_format": "pcm", "stream": True, "seed": seed}
    started = time.perf_counter()
    first, size = None, 0
    async with client.stream("POST", "/v1/audio/speech", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {(await response.aread())[:300]!r}")
        async for chunk in response.aiter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - started
            size += len(chunk)
    wall = time.perf_counter() - started
    audio = size / BYTES_PER_SAMPLE / SAMPLE_RATE
    return {"first_audio_s": round(first or wall, 3), "audio_s": round(audio, 2), "x_real_time": round(audio / wall, 3)}


async def streams_at_once(base: str, streams: int) -> dict:
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        await stream_one(client, seed=0)  # warm: the voice's prompt, the allocator, the step's first shapes
        started = time.perf_counter()
        each = await asyncio.gather(*(stream_one(client, seed=1 + index) for index in range(streams)))
        wall = time.perf_counter() - started
    return {
        "streams": streams,
        "each": each,
        "first_audio_s_median": round(statistics.median(one["first_audio_s"] for one in each), 3),
        "slowest_x_real_time": min(one["x_real_time"] for one in each),
        "all_x_real_time": round(sum(one["audio_s"] for one in each) / wall, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="0.6b")
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint directory (default: built for --size)")
    parser.add_argument("--frames", type=int, default=100, help="each request's frame budget (MAX_REQUEST_FRAMES)")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=list(PRECISIONS))
    parser.add_argument("--out", type=Path, help="where the JSON goes")
    args = parser.parse_args()
    report: dict = {"model": str(args.model or f"{args.size} (random weights)"), "cores": os.cpu_count()}
    report |= {"cpu": cpu_name(), "frames": args.frames, "results": []}
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / args.size, args.size)
        for precision in args.precisions:
            # no output cache: a stream whose request repeats an earlier one's would be replayed, not synthesised
            env = {**PRECISIONS[precision], "MAX_REQUEST_FRAMES": str(args.frames), "TEXT_NORMALIZE": "false"}
            env["AUDIO_CACHE_MAX"] = "0"
            with live_process("serve", model, "--preload-model", env=env, ready_within=600) as live:
                health = httpx.get(f"{live.base}/health").json()["model"]
                for streams in args.streams:
                    row = {"precision": precision, "dtype": health["dtype"], "quantization": health["quantization"]}
                    row |= asyncio.run(streams_at_once(live.base, streams))
                    report["results"].append(row)
                    print(json.dumps({key: value for key, value in row.items() if key != "each"}), flush=True)
    out = args.out or RESULTS / f"served_speech_cpu_{args.size if args.model is None else args.model.name}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
