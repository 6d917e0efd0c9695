"""HTTP serving overhead against a live `qwen3-tts-server serve` on loopback.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/http_loopback.py [--model DIR] [--requests 20]

Starts the server on a CustomVoice checkpoint (default: a random-weight tiny one built into a temp dir),
warms it up, then measures GET /health round trips (the HTTP floor) and, with short one-word requests
that each have their own seed:
- sequential whole-file pcm (`stream: false`, keep-alive): client wall time minus the server's queue +
  infer headers (overhead beyond the engine) and minus its total header (overhead outside the service);
- streamed pcm and mp3: time to the first non-empty body chunk and to the last byte;
- whole-file pcm from concurrent clients: requests/s, latency and errors.
The API has no frame cap: a request's budget is 40 + 8 per text token frames (48 for one word), and the
random model often runs to it, so frames per request are reported alongside. Prints a table and writes
benchmarks/results/http_loopback.json.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf
import torch

from qwen3_tts_server.testing.live_server import live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "http_loopback.json"
WORDS = ("Hi", "Yes", "No", "Ok", "Go", "Stop", "Wait", "Now", "Hello", "Thanks", "Sure", "Right", "Good", "Fine")
OUTPUT_RATE = 24000  # Hz, the default of every format used here
SAMPLES_PER_FRAME = 1920  # 80 ms
PCM_BYTES_PER_FRAME = 2 * SAMPLES_PER_FRAME  # 16-bit mono
SPEECH = "/v1/audio/speech"
TIMEOUT = 300.0

Seeds = Iterator[int]


def speech_body(seed: int, response_format: str, stream: bool) -> dict:
    """A one-word request; the seed picks the word too, so no two requests of a run are alike."""
    word = WORDS[seed % len(WORDS)]
    return {"input": word, "voice": "vivian", "response_format": response_format, "stream": stream, "seed": seed}


def ms(seconds: float) -> float:
    return round(1000 * seconds, 1)


def percentiles(values_ms: list[float]) -> dict[str, float]:
    p50, p95 = np.percentile(values_ms, [50, 95])
    return {"p50": round(float(p50), 1), "p95": round(float(p95), 1)}


def header_ms(response: httpx.Response, name: str) -> float:
    return float(response.headers[f"X-Latency-{name}-Ms"])


def whole_file(client: httpx.Client, seed: int) -> dict[str, float]:
    """One whole-file pcm request: client wall time, the server's latency headers and the frames."""
    started = time.perf_counter()
    response = client.post(SPEECH, json=speech_body(seed, "pcm", stream=False))
    wall = ms(time.perf_counter() - started)
    response.raise_for_status()
    engine = header_ms(response, "Queue") + header_ms(response, "Infer")
    return {
        "wall": wall,
        "engine": engine,
        "beyond_engine": wall - engine,
        "outside_service": wall - header_ms(response, "Total"),
        "frames": len(response.content) / PCM_BYTES_PER_FRAME,
    }


def sequential_overhead(client: httpx.Client, count: int, seeds: Seeds) -> dict:
    rows = [whole_file(client, next(seeds)) for _ in range(count)]
    result = {name: percentiles([row[name] for row in rows]) for name in rows[0] if name != "frames"}
    return {"requests": count, **result, "frames": frame_stats([row["frames"] for row in rows])}


def http_floor(client: httpx.Client, count: int) -> dict:
    """Round trips of GET /health: the framework and loopback cost of a request that does no work."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        client.get("/health").raise_for_status()
        times.append(ms(time.perf_counter() - started))
    return {"requests": count, "round_trip": percentiles(times)}


def frame_stats(frames: list[float]) -> dict[str, float]:
    return {"mean": round(float(np.mean(frames)), 1), "min": min(frames), "max": max(frames)}


def audio_frames(data: bytes, response_format: str) -> float:
    """Frames in a response body; for mp3, decoded samples over 1920 (encoder padding makes it approximate)."""
    if response_format == "pcm":
        return len(data) / PCM_BYTES_PER_FRAME
    return round(len(sf.read(io.BytesIO(data))[0]) / SAMPLES_PER_FRAME, 1)


def streamed(client: httpx.Client, seed: int, response_format: str) -> dict[str, float]:
    """One streamed request: times from sending to the first non-empty body chunk and to the last byte."""
    parts = []
    first = None
    started = time.perf_counter()
    with client.stream("POST", SPEECH, json=speech_body(seed, response_format, stream=True)) as response:
        response.raise_for_status()
        for part in response.iter_raw():
            if part and first is None:
                first = time.perf_counter() - started
            parts.append(part)
    last = time.perf_counter() - started
    return {"first_byte": ms(first), "last_byte": ms(last), "frames": audio_frames(b"".join(parts), response_format)}


def time_to_first_byte(client: httpx.Client, response_format: str, count: int, seeds: Seeds) -> dict:
    rows = [streamed(client, next(seeds), response_format) for _ in range(count)]
    return {
        "requests": count,
        "first_byte": percentiles([row["first_byte"] for row in rows]),
        "last_byte": percentiles([row["last_byte"] for row in rows]),
        "frames": frame_stats([row["frames"] for row in rows]),
    }


async def sustained(base: str, concurrency: int, count: int, seeds: Seeds) -> dict:
    """`count` whole-file pcm requests from `concurrency` clients at once; any non-200 is an error."""
    latencies: list[float] = []
    frames: list[float] = []
    errors = 0
    todo = iter(range(count))

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal errors
        for _ in todo:
            started = time.perf_counter()
            try:
                response = await client.post(SPEECH, json=speech_body(next(seeds), "pcm", stream=False))
            except httpx.HTTPError:
                errors += 1
                continue
            if response.status_code != 200:
                errors += 1
                continue
            latencies.append(ms(time.perf_counter() - started))
            frames.append(len(response.content) / PCM_BYTES_PER_FRAME)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "requests": count,
        "errors": errors,
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(latencies) / wall, 3),
        "audio_s_per_s": round(sum(frames) * SAMPLES_PER_FRAME / OUTPUT_RATE / wall, 2),
        "latency": percentiles(latencies) if latencies else None,
        "frames": frame_stats(frames) if frames else None,
    }


def warm_up(client: httpx.Client, seeds: Seeds, rounds: int) -> None:
    for _ in range(rounds):
        whole_file(client, next(seeds))
        streamed(client, next(seeds), "pcm")
        streamed(client, next(seeds), "mp3")


def machine(client: httpx.Client, model: str) -> dict:
    entry = client.get("/v1/models").raise_for_status().json()["data"][0]
    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),  # the default, as in the server process
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "model": model,
        "model_type": entry["type"],
        "model_size": entry["size"],
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


def run(model: str, args: argparse.Namespace) -> dict:
    seeds = itertools.count(1)
    with live_server(model) as base, httpx.Client(base_url=base, timeout=TIMEOUT) as client:
        meta = machine(client, model)
        warm_up(client, seeds, args.warmup)
        results = {
            "meta": meta,
            "health": http_floor(client, args.health_requests),
            "sequential": sequential_overhead(client, args.requests, seeds),
            "ttfb_pcm": time_to_first_byte(client, "pcm", args.stream_requests, seeds),
            "ttfb_mp3": time_to_first_byte(client, "mp3", args.stream_requests, seeds),
            "sustained": asyncio.run(sustained(base, args.concurrency, args.sustained_requests, seeds)),
        }
    meta["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


def print_table(results: dict) -> None:
    seq, pcm, mp3, load = (results[k] for k in ("sequential", "ttfb_pcm", "ttfb_mp3", "sustained"))
    rows = [
        ("GET /health, sequential", "round trip", results["health"]["round_trip"], None),
        ("whole-file pcm, sequential", "engine (queue + infer)", seq["engine"], seq["frames"]),
        ("", "client wall", seq["wall"], seq["frames"]),
        ("", "overhead beyond engine", seq["beyond_engine"], seq["frames"]),
        ("", "overhead outside service", seq["outside_service"], seq["frames"]),
        ("streamed pcm", "first byte", pcm["first_byte"], pcm["frames"]),
        ("", "last byte", pcm["last_byte"], pcm["frames"]),
        ("streamed mp3", "first byte", mp3["first_byte"], mp3["frames"]),
        ("", "last byte", mp3["last_byte"], mp3["frames"]),
        (f"whole-file pcm, {load['concurrency']} clients", "latency", load["latency"], load["frames"]),
    ]
    print(f"{'':30} {'':26} {'p50 ms':>9} {'p95 ms':>9}   frames/request (mean, min-max)")
    for group, name, times, frames in rows:
        span = f"{frames['mean']:.1f}, {frames['min']:g}-{frames['max']:g}" if frames else "-"
        print(f"{group:30} {name:26} {times['p50']:9.1f} {times['p95']:9.1f}   {span}")
    print(
        f"sustained: {load['requests_per_s']:.2f} req/s ({load['audio_s_per_s']:.2f} s of audio/s), "
        f"{load['requests']} requests in {load['wall_s']:.1f} s, {load['errors']} errors"
    )
    meta = results["meta"]
    print(
        f"{meta['model_size']} {meta['model_type']}, {meta['cpu_count']} CPUs, {meta['torch_threads']} torch threads, "
        f"python {meta['python']}, load average {meta['load_average_before'][0]} -> {meta['load_average_after'][0]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="CustomVoice checkpoint directory (default: build a tiny random one)")
    parser.add_argument("--warmup", type=int, default=2, help="rounds of one whole-file, one pcm, one mp3 request")
    parser.add_argument("--health-requests", type=int, default=50, help="GET /health round trips (HTTP floor)")
    parser.add_argument("--requests", type=int, default=20, help="sequential whole-file requests")
    parser.add_argument("--stream-requests", type=int, default=10, help="streamed requests per format")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sustained-requests", type=int, default=32, help="requests of the concurrent run")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(make_test_model(Path(tmp) / "tiny", size="tiny", model_type="custom_voice", seed=0))
        results = run(model, args)
    if not args.model:
        results["meta"]["model"] = "make-test-model --size tiny --type custom_voice"
    results["meta"]["settings"] = {k: v for k, v in vars(args).items() if k not in ("model", "out")}
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
