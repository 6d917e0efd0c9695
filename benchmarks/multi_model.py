"""Two models in one server: what a warm model's streams feel while a second model loads beside it, and what the
second model costs in memory against a second single-model server.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/multi_model.py [--requests 40]

Builds random-weight CustomVoice checkpoints (a tiny one and a `small` one, whose load takes a second or more
here) and runs real `serve` processes:

1. One server hosting both (MODELS). A client streams short requests to the warm tiny model one after another
   and times each one's first audio: alone, then while the small model loads (a one-word request to it starts
   the load), then with the small model loaded and idle. A probe times GET /health meanwhile (the event loop).
2. RSS: that server with both models loaded, against two single-model servers with one loaded each (their sum),
   and one single-model server alone (what a process costs without a model's weights).

The figures go to benchmarks/results/multi_model.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "multi_model.json"
ENV = {"MAX_REQUEST_FRAMES": "8", "TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0", "AUDIO_CACHE_MAX": "0"}
PRESET = {"input": "A warm stream.", "voice": "ryan", "response_format": "pcm", "stream": True}
SECOND = {**PRESET, "model": "small", "input": "Load."}  # the small checkpoint, by its directory's name


def rss_bytes(live: LiveProcess) -> int:
    for line in Path(f"/proc/{live.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def first_audio_ms(http: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    first = None
    async with http.stream("POST", "/v1/audio/speech", json=PRESET) as response:
        response.raise_for_status()
        async for _ in response.aiter_bytes():
            first = first or time.perf_counter()
    assert first is not None, "no audio"
    return 1000 * (first - started)


async def stall(live: LiveProcess, requests: int) -> dict:
    async with httpx.AsyncClient(base_url=live.base, timeout=300) as http:
        await first_audio_ms(http)  # the CustomVoice model loaded and warm
        alone = [await first_audio_ms(http) for _ in range(requests)]
        probes: list[float] = []
        loading = asyncio.create_task(http.post("/v1/audio/speech", json={**SECOND, "stream": False}))
        beside: list[float] = []
        load_started = time.perf_counter()
        while not loading.done():
            beside.append(await first_audio_ms(http))
            started = time.perf_counter()
            await http.get("/health")
            probes.append(1000 * (time.perf_counter() - started))
        (await loading).raise_for_status()
        load_seconds = time.perf_counter() - load_started
        after = [await first_audio_ms(http) for _ in range(requests)]  # the small model loaded beside, idle
    summary = {
        "ttfa_alone_p50_ms": statistics.median(alone),
        "ttfa_alone_p95_ms": percentile(alone, 0.95),
        "ttfa_during_load_p50_ms": statistics.median(beside),
        "ttfa_during_load_p95_ms": percentile(beside, 0.95),
        "requests_during_load": len(beside),
        "ttfa_second_model_loaded_idle_p50_ms": statistics.median(after),
        "ttfa_second_model_loaded_idle_p95_ms": percentile(after, 0.95),
        "second_model_load_seconds": round(load_seconds, 2),
        "health_during_load_max_ms": max(probes),
    }
    return {key: round(value, 1) if isinstance(value, float) else value for key, value in summary.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40, help="first-audio samples alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        custom = make_test_model(root / "custom_voice", "tiny", "custom_voice")
        small = make_test_model(root / "small", "small", "custom_voice")
        with live_process("serve", custom, "--model", str(small), env=ENV) as both:
            figures = {"stall": asyncio.run(stall(both, args.requests))}
            together = rss_bytes(both)
        singles = []
        for checkpoint in (custom, small):
            with live_process("serve", checkpoint, env=ENV) as alone, alone.client(timeout=300) as http:
                http.post("/v1/audio/speech", json={**PRESET, "stream": False}).raise_for_status()
                singles.append(rss_bytes(alone))
        with live_process("serve", custom, env=ENV) as empty:
            process_only = rss_bytes(empty)
    mib = 2**20
    figures["rss_mib"] = {
        "one_server_two_models": round(together / mib, 1),
        "two_servers_one_model_each": round(sum(singles) / mib, 1),
        "saved": round((sum(singles) - together) / mib, 1),
        "one_server_no_model_loaded": round(process_only / mib, 1),
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
