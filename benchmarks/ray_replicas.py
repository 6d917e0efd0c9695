"""One Ray Serve replica against two, and Serve's proxy against a direct `serve`, side by side in one run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ray_replicas.py [--model DIR] [--levels 8 16] [--rounds 2]

Three servers of one CustomVoice checkpoint (default: a random-weight tiny one), the output cache off, on every core
of this machine: `serve` (one process, torch on all cores), then on a local Ray cluster (ray_app.py) one replica
holding all the cores, then two replicas holding half each, Serve's proxy in front. For each:
- sequential: one short streamed request at a time, time to the first audio byte, and GET /health round trips:
  the proxy's added latency is the one-replica figure minus the direct one (same cores, same engine);
- load: N streamed requests sent together (`--levels`, each `--rounds` times), time to the first audio byte
  (p50/p95 over all of a level's requests) and aggregate real-time factor: seconds of audio made per wall second.
Frames per request differ (the random model's end of speech comes when it comes; seeds repeat across servers), so
audio seconds are counted from the bytes. Prints a table, writes benchmarks/results/ray_replicas.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import ray
import torch
from ray import serve

from qwen3_tts_server.bench.workload import BENCH_TEXT, percentile
from qwen3_tts_server.ray_app import APP_NAME, build
from qwen3_tts_server.testing.live_server import free_port, live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "ray_replicas.json"
SHORT_TEXT = "Hello there."
PCM_BYTES_PER_SECOND = 24000 * 2  # 16-bit mono at 24 kHz
SPEECH = "/v1/audio/speech"
TIMEOUT = 600.0


def summary(values_ms: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values_ms, 0.5), 1), "p95": round(percentile(values_ms, 0.95), 1)}


async def stream(client: httpx.AsyncClient, text: str, seed: int) -> tuple[float, int]:
    """One streamed pcm request: (ms to the first audio byte, bytes of audio)."""
    body = {"input": text, "voice": "vivian", "response_format": "pcm", "seed": seed}
    started = time.perf_counter()
    first, size = None, 0
    async with client.stream("POST", SPEECH, json=body) as response:
        response.raise_for_status()
        async for part in response.aiter_raw():
            if part and first is None:
                first = 1000 * (time.perf_counter() - started)
            size += len(part)
    assert first is not None, "no audio"
    return first, size


async def sequential(base: str, count: int, seeds: int) -> dict:
    """One request at a time: first audio byte of short streamed requests, GET /health round trips."""
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as client:
        first = [(await stream(client, SHORT_TEXT, seeds + n))[0] for n in range(count)]
        health = []
        for _ in range(count):
            started = time.perf_counter()
            (await client.get("/health")).raise_for_status()
            health.append(1000 * (time.perf_counter() - started))
    return {"requests": count, "first_audio_ms": summary(first), "health_round_trip_ms": summary(health)}


async def load(base: str, concurrency: int, rounds: int, seeds: int) -> dict:
    """`concurrency` streamed requests sent together, `rounds` times."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    first, audio_seconds, wall = [], 0.0, 0.0
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT, limits=limits) as client:
        for round_ in range(rounds):
            started = time.perf_counter()
            results = await asyncio.gather(
                *(stream(client, BENCH_TEXT, seeds + round_ * concurrency + n) for n in range(concurrency))
            )
            wall += time.perf_counter() - started
            first += [ttfa for ttfa, _ in results]
            audio_seconds += sum(size for _, size in results) / PCM_BYTES_PER_SECOND
    return {
        "concurrency": concurrency,
        "requests": concurrency * rounds,
        "first_audio_ms": summary(first),
        "aggregate_rtf": round(audio_seconds / wall, 3),
        "audio_seconds_per_request": round(audio_seconds / (concurrency * rounds), 2),
        "wall_seconds": round(wall, 2),
    }


async def measure(base: str, args: argparse.Namespace) -> dict:
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as client:
        await asyncio.gather(*(stream(client, SHORT_TEXT, 90_000 + n) for n in range(4)))  # warm-up
    # The same seeds on every server: the same requests.
    return {
        "sequential": await sequential(base, args.sequential, seeds=1_000),
        "load": [await load(base, level, args.rounds, seeds=10_000 * level) for level in args.levels],
    }


def run(model: str, args: argparse.Namespace, scratch: Path) -> dict:
    cores = len(os.sched_getaffinity(0))
    results: dict = {}
    with live_server(model, env={"AUDIO_CACHE_MAX": "0", "DATA_DIR": str(scratch / "direct")}) as base:
        print("direct serve", file=sys.stderr)
        results["direct"] = asyncio.run(measure(base, args))
    ray.init(num_cpus=cores, include_dashboard=False, object_store_memory=100 << 20, log_to_driver=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        settings = {"model_id": model, "preload_model": True, "audio_cache_max": 0, "data_dir": str(scratch / "ray")}
        for name, replicas in (("ray_1_replica", 1), ("ray_2_replicas", 2)):
            print(name, file=sys.stderr)
            options = {"num_replicas": replicas, "num_gpus": 0, "num_cpus": cores // replicas, "settings": settings}
            serve.run(build(options), name=APP_NAME, route_prefix="/")
            results[name] = asyncio.run(measure(f"http://127.0.0.1:{port}", args))
            serve.delete(APP_NAME)  # its CPUs back before the next one starts (no room for a rolling update)
    finally:
        serve.shutdown()
        ray.shutdown()
    return results


def proxy_added(results: dict) -> dict:
    """One replica through Serve's proxy minus the direct server: same cores, same engine, one request at a time."""
    added = {}
    for figure in ("first_audio_ms", "health_round_trip_ms"):
        proxied, direct = results["ray_1_replica"]["sequential"][figure], results["direct"]["sequential"][figure]
        added[figure] = {key: round(proxied[key] - direct[key], 1) for key in ("p50", "p95")}
    return added


def print_table(report: dict) -> None:
    servers = ("direct", "ray_1_replica", "ray_2_replicas")
    print(f"{'':34}" + "".join(f"{name:>22}" for name in servers))
    for figure in ("first_audio_ms", "health_round_trip_ms"):
        cells = [report[name]["sequential"][figure] for name in servers]
        print(f"{'sequential ' + figure:34}" + "".join(f"{c['p50']:>10.1f} /{c['p95']:>9.1f}" for c in cells))
    for index, level in enumerate(report["meta"]["levels"]):
        rows = [report[name]["load"][index] for name in servers]
        ttfa = "".join(f"{r['first_audio_ms']['p50']:>10.1f} /{r['first_audio_ms']['p95']:>9.1f}" for r in rows)
        print(f"{f'{level} streams: first audio ms p50/p95':34}" + ttfa)
        print(f"{f'{level} streams: aggregate x real time':34}" + "".join(f"{r['aggregate_rtf']:>22.2f}" for r in rows))
    added = report["proxy_added_ms"]
    print(
        "proxy added (one replica minus direct), p50/p95 ms: first audio "
        f"{added['first_audio_ms']['p50']}/{added['first_audio_ms']['p95']}, /health "
        f"{added['health_round_trip_ms']['p50']}/{added['health_round_trip_ms']['p95']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="CustomVoice checkpoint directory (default: build a tiny random one)")
    parser.add_argument("--levels", type=int, nargs="+", default=[8, 16], help="concurrent streams")
    parser.add_argument("--rounds", type=int, default=2, help="times each level is sent")
    parser.add_argument("--sequential", type=int, default=30, help="one-at-a-time requests (and /health calls)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        model = args.model or str(make_test_model(scratch / "tiny", size="tiny", model_type="custom_voice", seed=0))
        load_before = os.getloadavg()[0]
        results = run(model, args, scratch)
    report = {
        "meta": {
            "model": args.model or "make-test-model --size tiny --type custom_voice",
            "cpu_count": len(os.sched_getaffinity(0)),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "ray": ray.__version__,
            "levels": args.levels,
            "rounds": args.rounds,
            "load_average_before": round(load_before, 2),
            "load_average_after": round(os.getloadavg()[0], 2),
        },
        **results,
        "proxy_added_ms": proxy_added(results),
    }
    print_table(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
