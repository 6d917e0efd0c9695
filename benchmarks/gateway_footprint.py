"""Memory and latency cost of gateway mode, against a live `qwen3-tts-server gateway` on loopback.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/gateway_footprint.py [--model DIR] [--requests 20]

Starts the gateway on a CustomVoice checkpoint (default: a random-weight tiny one built into a temp dir) with a
fixed worker port, so the same worker is reachable directly and through the gateway. Prints:
- resident memory: the idle gateway (no request yet), the worker after a request, the gateway beside it;
- time to the first body byte of a streamed pcm request (closed after that byte) and the round trip of
  GET /v1/models, p50/p95 directly to the worker and through the gateway, alternating between the two.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from qwen3_tts_server.testing.live_gateway import live_gateway
from qwen3_tts_server.testing.live_server import free_port
from qwen3_tts_server.testing.random_checkpoint import make_test_model

WORDS = ("Hi", "Yes", "No", "Ok", "Go", "Stop", "Wait", "Now", "Hello", "Thanks", "Sure", "Right", "Good", "Fine")
TIMEOUT = 300.0
SETTLE = 0.3  # seconds after closing a stream early, for the worker to drop the cancelled row


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def first_byte_ms(client: httpx.Client, base: str, seed: int) -> float:
    body = {"input": WORDS[seed % len(WORDS)], "voice": "alloy", "response_format": "pcm", "stream": True, "seed": seed}
    started = time.perf_counter()
    with client.stream("POST", f"{base}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            if chunk:
                elapsed = time.perf_counter() - started
                break
        else:
            raise RuntimeError("empty stream")
    time.sleep(SETTLE)
    return 1000 * elapsed


def round_trip_ms(client: httpx.Client, base: str) -> float:
    started = time.perf_counter()
    client.get(f"{base}/v1/models").raise_for_status()
    return 1000 * (time.perf_counter() - started)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.1f} ms   p95 {p95:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="checkpoint directory (default: a random-weight tiny CustomVoice one)")
    parser.add_argument("--requests", type=int, default=20, help="streamed requests each way (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or make_test_model(Path(tmp) / "model", "tiny", "custom_voice", seed=0)
        worker_port = free_port()
        env = {"WORKER_PORT": str(worker_port), "IDLE_TIMEOUT": "0", "LOG_LEVEL": "warning"}
        with live_gateway(model, env=env) as gateway, httpx.Client(timeout=TIMEOUT) as client:
            time.sleep(1)  # let the fresh process settle
            idle = rss_mib(gateway.process.pid)
            cold = first_byte_ms(client, gateway.base, 0) / 1000
            worker_pid = gateway.health()["gateway"]["worker_pid"]
            direct = f"http://127.0.0.1:{worker_port}"
            for seed in range(1, 4):  # warm-up, both ways
                first_byte_ms(client, direct, seed)
                first_byte_ms(client, gateway.base, seed)
            ttfb: dict[str, list[float]] = {"direct": [], "gateway": []}
            models: dict[str, list[float]] = {"direct": [], "gateway": []}
            for seed in range(100, 100 + args.requests):
                for way, base in (("direct", direct), ("gateway", gateway.base)):
                    ttfb[way].append(first_byte_ms(client, base, seed))
                    models[way].append(round_trip_ms(client, base))
            worker = rss_mib(worker_pid)
            beside = rss_mib(gateway.process.pid)
    print(f"gateway idle RSS (before any request):     {idle:7.1f} MiB")
    print(f"worker RSS after requests (tiny model):    {worker:7.1f} MiB")
    print(f"gateway RSS while its worker runs:         {beside:7.1f} MiB")
    print(f"cold start: first audio byte after {cold:.1f} s (worker start and model load included)")
    print(f"streamed pcm TTFB, {args.requests} requests each:")
    for way in ("direct", "gateway"):
        print(f"  {way:8} {percentiles(ttfb[way])}")
    print("GET /v1/models round trip:")
    for way in ("direct", "gateway"):
        print(f"  {way:8} {percentiles(models[way])}")
    overhead = statistics.median(ttfb["gateway"]) - statistics.median(ttfb["direct"])
    print(f"proxy overhead on TTFB (p50 difference): {overhead:+.1f} ms")


if __name__ == "__main__":
    main()
