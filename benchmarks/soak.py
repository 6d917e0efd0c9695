"""A soak: mixed traffic at about 80% of the capacity it measures first, for N minutes, against a live server.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/soak.py [--model DIR] [--minutes 30] [--load 0.8]

1. Capacity: the mix (qwen3_tts_server/bench/traffic.py: streamed, whole-file, SSE, WebSocket with cancels,
   inline clones, output-cache hits, one client in ten leaving early) sent closed-loop by as many clients as the
   engine has rows, for --capacity-seconds: capacity is the requests completed per second.
2. Soak: requests arrive at random (a Poisson process) at --load times that rate for --minutes.
Every --sample-seconds the server's /health gives its RSS, open descriptors, threads, asyncio tasks and streams.
Reported: errors by kind (goal: none), time to first audio p50/p95 per minute (the streamed kinds), throughput
per minute, RSS and descriptors over time; as JSON and a PNG of those curves. Without --model it builds the
`small` random-weight Base checkpoint (cloning needs a Base model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from qwen3_tts_server.bench.traffic import Outcome, Traffic, pick_kind, reference_wav
from qwen3_tts_server.bench.workload import percentile
from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

RESULTS = Path(__file__).resolve().parent / "results"
STREAMED_KINDS = {"streamed", "sse", "websocket", "leaves"}  # time to first audio is theirs


async def capacity(traffic: Traffic, clients: int, seconds: float, rng: random.Random) -> tuple[float, list[Outcome]]:
    """Requests completed per second with `clients` sending back to back for `seconds`."""
    outcomes: list[Outcome] = []
    until = time.monotonic() + seconds

    async def client() -> None:
        while time.monotonic() < until:
            outcomes.append(await traffic.send(pick_kind(rng), random.Random(rng.random())))

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    return len(outcomes) / (time.monotonic() - started), outcomes


async def soak(traffic: Traffic, rate: float, seconds: float, rng: random.Random, sample_every: float) -> dict:
    """Poisson arrivals at `rate` per second for `seconds`; the outcomes and /health samples over time."""
    outcomes: list[Outcome] = []
    samples: list[dict] = []
    started = time.monotonic()
    until = started + seconds

    async def sampler() -> None:
        while time.monotonic() < until:
            samples.append(sample(await traffic.client.get("/health"), time.monotonic() - started))
            await asyncio.sleep(sample_every)

    async def one(kind: str, seed: float) -> None:
        outcomes.append(await traffic.send(kind, random.Random(seed)))

    sampling = asyncio.create_task(sampler())
    sent: set[asyncio.Task] = set()
    while (now := time.monotonic()) < until:
        task = asyncio.create_task(one(pick_kind(rng), rng.random()))
        sent.add(task)
        task.add_done_callback(sent.discard)
        await asyncio.sleep(min(rng.expovariate(rate), until - now))
    await asyncio.gather(*sent)
    await sampling
    drained = time.monotonic() - started
    samples.append(sample(await traffic.client.get("/health"), drained))
    return {"outcomes": outcomes, "samples": samples, "started": started}


def sample(response: httpx.Response, at: float) -> dict:
    health = response.json()
    return {
        "t": round(at, 1),
        "rss_mib": round(health["memory"]["rss_bytes"] / 2**20, 1),
        "open_fds": health["process"]["open_fds"],
        "threads": health["process"]["threads"],
        "asyncio_tasks": health["process"]["asyncio_tasks"],
        "active_streams": health["active_streams"],
        "paused_streams": health["paused_streams"],
        "queue_depth": health["queue_depth"],
    }


def per_minute(outcomes: list[Outcome], started: float) -> list[dict]:
    minutes: dict[int, list[Outcome]] = {}
    for outcome in outcomes:
        minutes.setdefault(int((outcome.started - started) // 60), []).append(outcome)
    rows = []
    for minute, done in sorted(minutes.items()):
        first_audio = [o.first_audio for o in done if o.kind in STREAMED_KINDS and o.first_audio and not o.error]
        rows.append(
            {
                "minute": minute,
                "requests": len(done),
                "errors": sum(o.error is not None for o in done),
                "audio_seconds": round(sum(o.audio_bytes for o in done) / 48000, 1),  # 16-bit 24 kHz
                "ttfa_p50": round(percentile(first_audio, 0.5), 3) if first_audio else None,
                "ttfa_p95": round(percentile(first_audio, 0.95), 3) if first_audio else None,
            }
        )
    return rows


def window(outcomes: list[Outcome], samples: list[dict], started: float, first: bool, minutes: float = 5) -> dict:
    """TTFA p50/p95 and mean RSS over the first (or last) `minutes` of the soak."""
    end = max(o.started for o in outcomes) - started
    inside = (lambda t: t < minutes * 60) if first else (lambda t: t >= end - minutes * 60)
    first_audio = [
        o.first_audio
        for o in outcomes
        if inside(o.started - started) and o.kind in STREAMED_KINDS and o.first_audio and not o.error
    ]
    rss = [s["rss_mib"] for s in samples if inside(s["t"])]
    return {
        "ttfa_p50": round(percentile(first_audio, 0.5), 3),
        "ttfa_p95": round(percentile(first_audio, 0.95), 3),
        "rss_mib_mean": round(sum(rss) / len(rss), 1),
        "requests": sum(inside(o.started - started) for o in outcomes),
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes, samples = result["per_minute"], result["samples"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    m = [row["minute"] for row in minutes]
    axes[0][0].plot(m, [row["ttfa_p50"] for row in minutes], label="p50")
    axes[0][0].plot(m, [row["ttfa_p95"] for row in minutes], label="p95")
    axes[0][0].set(title="Time to first audio (streamed kinds)", xlabel="minute", ylabel="seconds")
    axes[0][0].legend()
    axes[0][1].plot(m, [row["requests"] for row in minutes], label="requests")
    axes[0][1].plot(m, [row["audio_seconds"] for row in minutes], label="audio seconds")
    axes[0][1].plot(m, [row["errors"] for row in minutes], label="errors")
    axes[0][1].set(title="Throughput per minute", xlabel="minute")
    axes[0][1].legend()
    t = [s["t"] / 60 for s in samples]
    axes[1][0].plot(t, [s["rss_mib"] for s in samples])
    axes[1][0].set(title="Server RSS", xlabel="minute", ylabel="MiB")
    axes[1][1].plot(t, [s["open_fds"] for s in samples], label="open descriptors")
    axes[1][1].plot(t, [s["threads"] for s in samples], label="threads")
    axes[1][1].plot(t, [s["asyncio_tasks"] for s in samples], label="asyncio tasks")
    axes[1][1].set(title="Descriptors, threads, tasks", xlabel="minute")
    axes[1][1].legend()
    fig.suptitle(
        f"Soak: {result['minutes']} min at {result['load']:.0%} of {result['capacity_rps']:.2f} requests/s "
        f"({result['model']}, {result['requests']} requests, {sum(result['errors'].values())} errors)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)


async def run(args: argparse.Namespace, model: Path) -> dict:
    rng = random.Random(args.seed)
    references = [reference_wav(3.0, 24000, pitch) for pitch in (110, 150, 190)]
    with live_process("serve", model, "--preload-model", ready_within=600) as live:
        traffic = Traffic.open(live.base, "", references, timeout=args.request_timeout)
        upload = {"audio_sample": ("reference.wav", reference_wav(4.0), "audio/wav")}
        created = await traffic.client.post("/v1/audio/voices", data={"name": "soak", "mode": "x_vector"}, files=upload)
        traffic.voice = created.raise_for_status().json()["id"]
        rows = (await traffic.client.get("/health")).json()["max_batch_size"]
        print(f"measuring capacity: {rows} clients for {args.capacity_seconds:.0f} s", flush=True)
        rate, measured = await capacity(traffic, rows, args.capacity_seconds, rng)
        print(f"capacity {rate:.3f} requests/s; soaking at {args.load * rate:.3f}/s for {args.minutes} min", flush=True)
        soaked = await soak(traffic, args.load * rate, args.minutes * 60, rng, args.sample_seconds)
        await traffic.aclose()
    outcomes, samples, started = soaked["outcomes"], soaked["samples"], soaked["started"]
    return {
        "model": args.model_name,
        "minutes": args.minutes,
        "load": args.load,
        "capacity_rps": round(rate, 4),
        "capacity_errors": dict(Counter(o.error for o in measured if o.error)),
        "arrival_rps": round(args.load * rate, 4),
        "requests": len(outcomes),
        "by_kind": dict(Counter(o.kind for o in outcomes)),
        "errors": dict(Counter(f"{o.kind}:{o.error}" for o in outcomes if o.error)),
        "cache_hits": sum(o.cache == "hit" for o in outcomes),
        "first_5_minutes": window(outcomes, samples, started, first=True),
        "last_5_minutes": window(outcomes, samples, started, first=False),
        "open_fds": {"first": samples[0]["open_fds"], "last": samples[-1]["open_fds"]},
        "threads": {"first": samples[0]["threads"], "last": samples[-1]["threads"]},
        "per_minute": per_minute(outcomes, started),
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a Base checkpoint (default: build the small random one)")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--load", type=float, default=0.8, help="share of the measured capacity to send")
    parser.add_argument("--capacity-seconds", type=float, default=120.0)
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--request-timeout", type=float, default=300.0, help="a client gives up after this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "soak_small_cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "small_base", size="small", model_type="base")
        args.model_name = str(args.model) if args.model else "small (random weights, Base)"
        result = asyncio.run(run(args, model))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out.with_suffix(".png"))
    summary = {key: result[key] for key in ("capacity_rps", "requests", "errors", "first_5_minutes", "last_5_minutes")}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
