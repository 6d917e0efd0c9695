"""Two models in one server: what a warm model's streams feel while a second model loads beside it, and what the
second model costs in memory against a second single-model server.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/multi_model.py [--rounds 6] [--device cuda --second DIR --no-rss]

Builds random-weight CustomVoice checkpoints (a tiny one and a `small` one, whose load takes a second or more
here; `--second` names another to load beside the tiny one, as the GPU check does with a 0.6B) and runs real
`serve` processes on `--device`:

1. One server hosting both (MODELS, IDLE_TIMEOUT=4). A client streams short requests to the warm tiny model one
   after another, without pause, and times each one's first audio. Each round, a one-word request to the small
   model loads it; once idle it unloads again (IDLE_TIMEOUT). The warm model's samples are sorted by what the
   small model did meanwhile: loading (until /health first says it is ready), loaded and idle (after its engine
   thread ended), or nothing (unloaded); the samples while it serves its own request and lingers are left out.
   Alone and beside a load are thus measured in the same minute, under the same noise. A probe times GET /health
   during the loads (the event loop).
2. RSS: that server with both models loaded, against two single-model servers with one loaded each (their sum),
   and one single-model server alone (what a process costs without a model's weights).

The figures go to benchmarks/results/multi_model.json (or `--out`).
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

from qwen3_tts_server.config import model_id_of
from qwen3_tts_server.engine.rows import IDLE_THREAD_LINGER
from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "multi_model.json"
ENV = {"MAX_REQUEST_FRAMES": "3", "TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0", "AUDIO_CACHE_MAX": "0"}
UNLOADS_AFTER = 4.0  # seconds: the shared server's IDLE_TIMEOUT (the warm model, never idle, stays)
# Raw PCM in a named language: the GPU check's kit has neither PyAV nor lingua (tools/gpu_kit.sh).
PRESET = {"input": "A warm stream.", "voice": "ryan", "response_format": "pcm", "stream": True, "language": "English"}
SECOND = {**PRESET, "input": "Load.", "stream": False}  # to the second checkpoint (its `model` added)


def rss_bytes(live: LiveProcess) -> int:
    for line in Path(f"/proc/{live.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def first_audio_ms(http: httpx.AsyncClient) -> float:
    """One whole stream (three frames); its time to first audio."""
    started = time.perf_counter()
    first = None
    async with http.stream("POST", "/v1/audio/speech", json=PRESET) as response:
        response.raise_for_status()
        async for chunk in response.aiter_bytes():
            first = first or (chunk and time.perf_counter())
    assert first, "no audio"
    return 1000 * (first - started)


async def model_state(http: httpx.AsyncClient, model_id: str) -> str:
    return (await http.get("/health")).json()["models"][model_id]["state"]


async def stall(live: LiveProcess, rounds: int, second: str) -> tuple[dict, int]:
    """The figures, and the server's RSS with both models loaded."""
    samples: dict[str, list[float]] = {"alone": [], "during_load": [], "loaded_idle": []}
    probes: list[float] = []
    loads: list[float] = []
    rss = 0
    async with httpx.AsyncClient(base_url=live.base, timeout=300) as http:
        await first_audio_ms(http)  # the CustomVoice model loaded and warm
        for _ in range(rounds):
            deadline = time.perf_counter() + 2
            while time.perf_counter() < deadline:
                samples["alone"].append(await first_audio_ms(http))
            started = time.perf_counter()
            loading = asyncio.create_task(http.post("/v1/audio/speech", json={**SECOND, "model": second}))
            ready = False
            while not loading.done():
                sample = await first_audio_ms(http)
                probe = time.perf_counter()
                state = await model_state(http, second)
                probes.append(1000 * (time.perf_counter() - probe))
                if not ready:  # loading when this sample ended; after it, the small model serves its request
                    samples["during_load"].append(sample)
                if state == "ready" and not ready:
                    ready = True
                    loads.append(time.perf_counter() - started)
            (await loading).raise_for_status()
            if not ready:  # ready and done between two looks
                loads.append(time.perf_counter() - started)
            rss = max(rss, rss_bytes(live))
            deadline = time.perf_counter() + IDLE_THREAD_LINGER + 0.5
            while time.perf_counter() < deadline:  # the small model's engine thread lingers: not counted
                await first_audio_ms(http)
            while await model_state(http, second) != "unloaded":
                samples["loaded_idle"].append(await first_audio_ms(http))
    summary: dict[str, float | int | None] = {}
    for phase, values in samples.items():  # a phase a slow machine gave no sample (0 requests) has no figures
        summary[f"ttfa_{phase}_p50_ms"] = statistics.median(values) if values else None
        summary[f"ttfa_{phase}_p95_ms"] = percentile(values, 0.95) if values else None
        summary[f"requests_{phase}"] = len(values)
    summary["second_model_load_seconds_p50"] = statistics.median(loads)  # to its first "ready" seen on /health
    summary["health_during_load_p50_ms"] = statistics.median(probes) if probes else None
    summary["health_during_load_p99_ms"] = percentile(probes, 0.99) if probes else None
    summary["health_during_load_max_ms"] = max(probes, default=None)
    summary["health_probes_during_load"] = len(probes)
    return {key: round(value, 1) if isinstance(value, float) else value for key, value in summary.items()}, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="loads and unloads of the second model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--second", type=Path, help="the CustomVoice checkpoint to load beside (default: a small one)")
    parser.add_argument("--no-rss", action="store_true", help="only the first part")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    env = {**ENV, "DEVICE": args.device}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        custom = make_test_model(root / "custom_voice", "tiny", "custom_voice")
        second = args.second or make_test_model(root / "small", "small", "custom_voice")
        shared = {**env, "IDLE_TIMEOUT": str(UNLOADS_AFTER)}
        with live_process("serve", custom, "--model", str(second), env=shared) as both:
            stalls, together = asyncio.run(stall(both, args.rounds, model_id_of(str(second))))
            figures: dict = {"device": args.device, "stall": stalls}
        if not args.no_rss:
            singles = []
            for checkpoint in (custom, second):
                with live_process("serve", checkpoint, env=env) as alone, alone.client(timeout=300) as http:
                    http.post("/v1/audio/speech", json={**PRESET, "stream": False}).raise_for_status()
                    singles.append(rss_bytes(alone))
            with live_process("serve", custom, env=env) as empty:
                process_only = rss_bytes(empty)
            mib = 2**20
            figures["rss_mib"] = {
                "one_server_two_models": round(together / mib, 1),
                "two_servers_one_model_each": round(sum(singles) / mib, 1),
                "saved": round((sum(singles) - together) / mib, 1),
                "one_server_no_model_loaded": round(process_only / mib, 1),
            }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
