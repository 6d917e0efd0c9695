"""Resident memory of a live server over many requests, with glibc's malloc and with jemalloc (as the image sets it).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/allocator_rss.py [--model DIR] [--requests 500]

Starts `qwen3-tts-server serve` twice on the same CustomVoice checkpoint (default: a random-weight tiny one built
into a temp dir), once as it is and once with jemalloc preloaded (LD_PRELOAD, MALLOC_CONF as in the Dockerfile),
one after the other, and sends both the same requests: varied texts, voices and formats (wav, mp3, opus, pcm),
streamed and `stream: false`, a third of them from several clients at once. The output cache is off, so every
request runs the model, and MAX_REQUEST_FRAMES keeps each one short. The server's RSS (VmRSS) is read after a
warm-up, after every 50 requests, and once more after the server has been idle a few seconds. Prints the two runs
side by side and writes benchmarks/results/allocator_rss.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import torch

from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "allocator_rss.json"
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # Debian's libjemalloc2 on x86_64
MALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"  # as the Dockerfile sets it
TEXTS = (
    "Hello there.",
    "Your order has shipped.",
    "Press one for sales, two for support.",
    "The meeting moved to 3:30 PM on May 5th.",
    "It costs $12.50, or about 11 euros.",
    "Thanks for waiting!",
    "Please hold while we connect you.",
    "Call 555-0100 before 9 a.m.",
    "Is it raining in Paris today?",
    "你好，欢迎光临。",
    "Good morning. Your flight 42 boards at gate B7.",
    "Okay.",
    "We could not find that account; please try again.",
)
VOICES = ("vivian", "ryan", "alloy", "serena", "nova")
FORMATS = ("wav", "mp3", "opus", "pcm")
BLOCK = 10  # requests sent together: one by one, or every third block from CONCURRENCY clients at once
TIMEOUT = 300.0


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for {pid}")


def maps_jemalloc(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as maps:
        return "libjemalloc" in maps.read()


def request_body(index: int) -> dict:
    """The index-th request of the run: text, voice, format and streaming vary independently; its own seed."""
    return {
        "input": TEXTS[index % len(TEXTS)],
        "voice": VOICES[index % len(VOICES)],
        "response_format": FORMATS[index % len(FORMATS)],
        "stream": (index // len(FORMATS)) % 2 == 0,
        "seed": index,
    }


def send(client: httpx.Client, body: dict) -> int:
    """One request, read to its end; returns the body's size (0 for a failure)."""
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        size = sum(len(part) for part in response.iter_raw())
    return size if response.status_code == 200 else 0


def run(model: Path, args: argparse.Namespace, preload: str | None) -> dict:
    env = {
        "IDLE_TIMEOUT": "0",
        "AUDIO_CACHE_MAX": "0",
        "MAX_REQUEST_FRAMES": str(args.max_frames),
        "LOG_LEVEL": "warning",
        "LD_PRELOAD": preload or "",
        "MALLOC_CONF": MALLOC_CONF if preload else "",
    }
    sizes: list[int] = []
    samples: list[dict] = []
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    with (
        live_process("serve", model, "--preload-model", env=env) as live,
        live.client(timeout=TIMEOUT, limits=limits) as client,
        ThreadPoolExecutor(args.concurrency) as pool,
    ):
        pid = live.process.pid
        loaded = maps_jemalloc(pid)
        if loaded != bool(preload):
            raise RuntimeError(f"jemalloc {'not ' if preload else ''}in the server's memory map")
        for index in range(2 * len(FORMATS)):  # every format, streamed and whole, before the first sample
            send(client, request_body(10_000 + index))
        samples.append({"requests": 0, "rss_mib": rss_mib(pid)})
        started = time.perf_counter()
        for first in range(0, args.requests, BLOCK):
            bodies = [request_body(index) for index in range(first, min(first + BLOCK, args.requests))]
            if (first // BLOCK) % 3 == 2:
                sizes += pool.map(lambda body: send(client, body), bodies)
            else:
                sizes += [send(client, body) for body in bodies]
            if len(sizes) % args.sample_every == 0 or len(sizes) == args.requests:
                samples.append({"requests": len(sizes), "rss_mib": rss_mib(pid)})
                print(f"  {len(sizes):4} requests: {samples[-1]['rss_mib']:7.1f} MiB", file=sys.stderr)
        wall = time.perf_counter() - started
        time.sleep(args.idle)
        idle = rss_mib(pid)
    rss = [sample["rss_mib"] for sample in samples]
    half = next(sample["rss_mib"] for sample in samples if sample["requests"] >= args.requests // 2)
    return {
        "allocator": f"jemalloc ({preload})" if preload else "glibc malloc",
        "samples": samples,
        "start_mib": rss[0],
        "peak_mib": max(rss),
        "end_mib": rss[-1],
        "growth_second_half_mib": round(rss[-1] - half, 1),
        "idle_mib": idle,
        "errors": sizes.count(0),
        "body_bytes": sum(sizes),
        "wall_s": round(wall, 1),
    }


def print_table(results: dict) -> None:
    plain, jemalloc = results["plain"], results["jemalloc"]
    print(f"{'RSS, MiB':28} {'glibc malloc':>13} {'jemalloc':>13} {'ratio':>7}")
    for before, after in zip(plain["samples"], jemalloc["samples"], strict=True):
        label = "after warm-up" if before["requests"] == 0 else f"after {before['requests']} requests"
        print(f"{label:28} {before['rss_mib']:13.1f} {after['rss_mib']:13.1f}")
    half = results["meta"]["settings"]["requests"] // 2
    rows = (
        ("start", "start_mib"),
        ("peak", "peak_mib"),
        ("end", "end_mib"),
        (f"growth, last {half} requests", "growth_second_half_mib"),
        (f"after {results['meta']['settings']['idle']:g} s idle", "idle_mib"),
    )
    for label, key in rows:
        ratio = results["ratio_jemalloc_to_plain"].get(key)
        shown = f"{ratio:7.2f}" if ratio is not None else f"{'-':>7}"
        print(f"{label:28} {plain[key]:13.1f} {jemalloc[key]:13.1f} {shown}")
    for name, run in (("glibc malloc", plain), ("jemalloc", jemalloc)):
        print(f"{name}: {run['errors']} errors, {run['body_bytes']} bytes of audio, {run['wall_s']} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="CustomVoice checkpoint directory (default: build a tiny random one)")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--sample-every", type=int, default=50, help="requests between two RSS samples")
    parser.add_argument("--concurrency", type=int, default=4, help="clients of the concurrent blocks")
    parser.add_argument("--max-frames", type=int, default=12, help="the server's MAX_REQUEST_FRAMES (80 ms each)")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds idle before the last sample")
    parser.add_argument("--jemalloc", default=JEMALLOC, help="the jemalloc library to preload")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.sample_every % BLOCK:
        parser.error(f"--sample-every must be a multiple of {BLOCK}")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model or make_test_model(Path(tmp) / "tiny", "tiny", "custom_voice", seed=0))
        meta = {
            "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "model": args.model or "make-test-model --size tiny --type custom_voice",
            "malloc_conf": MALLOC_CONF,
            "load_average_before": [round(x, 2) for x in os.getloadavg()],
            "settings": {k: v for k, v in vars(args).items() if k not in ("model", "out")},
        }
        print("glibc malloc:", file=sys.stderr)
        plain = run(model, args, None)
        print("jemalloc:", file=sys.stderr)
        jemalloc = run(model, args, args.jemalloc)
    meta["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    keys = ("start_mib", "peak_mib", "end_mib", "idle_mib")
    results = {
        "meta": meta,
        "plain": plain,
        "jemalloc": jemalloc,
        "ratio_jemalloc_to_plain": {key: round(jemalloc[key] / plain[key], 3) for key in keys},
    }
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
