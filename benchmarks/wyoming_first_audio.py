"""Time to the first audio over the Wyoming protocol, against a live `serve --wyoming-port` on loopback.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/wyoming_first_audio.py [--model DIR] [--runs 20] [--token-rate 30]

Measured per run, each on a fresh connection as Home Assistant makes one per request, with the wyoming library's
client: a `synthesize` with the whole text, from sending it to the first `audio-chunk`; and the streamed form, from
the first `synthesize-chunk` to the first `audio-chunk`, the text sent as an LLM streams it (word pieces at
--token-rate per second, as benchmarks/ws_first_audio.py sends them) and, for comparison, in one chunk. Each run
disconnects once audio arrives, which cancels the rest. The output cache is off: every run is generated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from ws_first_audio import TEXT, pieces, summary
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from qwen3_tts_server.testing.live_server import free_port, live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "wyoming_first_audio.json"
VOICE = SynthesizeVoice(name="vivian")


async def first_audio(client: AsyncTcpClient, started: float) -> float:
    while (event := await client.read_event()) is not None:
        if AudioChunk.is_type(event.type):
            return time.perf_counter() - started
    raise RuntimeError("the connection closed before any audio")


async def run_once(port: int, form: str, token_rate: float) -> float:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        if form == "synthesize":
            started = time.perf_counter()
            await client.write_event(Synthesize(TEXT, voice=VOICE).event())
            return await first_audio(client, started)
        await client.write_event(SynthesizeStart(voice=VOICE).event())
        started = time.perf_counter()
        if form == "streamed_whole":
            await client.write_event(SynthesizeChunk(TEXT).event())
            await client.write_event(SynthesizeStop().event())
            return await first_audio(client, started)
        sender = asyncio.create_task(send_pieces(client, token_rate))
        try:
            return await first_audio(client, started)
        finally:
            sender.cancel()


async def send_pieces(client: AsyncTcpClient, token_rate: float) -> None:
    for piece in pieces(TEXT):
        await client.write_event(SynthesizeChunk(piece).event())
        await asyncio.sleep(1 / token_rate)
    await client.write_event(Synthesize(TEXT, voice=VOICE).event())  # Home Assistant's copy, ignored
    await client.write_event(SynthesizeStop().event())


async def measure(port: int, runs: int, token_rate: float) -> dict:
    await run_once(port, "synthesize", token_rate)  # warm-up
    results = {}
    for form in ("synthesize", "streamed_pieces", "streamed_whole"):
        results[form] = summary([await run_once(port, form, token_rate) for _ in range(runs)])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="CustomVoice checkpoint (default: a random-weight tiny one)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--token-rate", type=float, default=30.0, help="word pieces per second")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or make_test_model(Path(scratch) / "tiny", size="tiny", model_type="custom_voice")
        # No output cache: every run is generated (a repeated text would replay the first run's audio).
        with live_server(model, "--wyoming-port", str(port), "--audio-cache-max", "0"):
            results = asyncio.run(measure(port, args.runs, args.token_rate))
    first_clause = "Sure, I can help with that."
    print(f"first clause {first_clause!r}: {len(pieces(first_clause))} pieces at {args.token_rate:g}/s")
    print(f"{'form':<18}{'to first audio-chunk p50/p95 ms':>34}")
    for form, row in results.items():
        print(f"{form:<18}{row['p50_ms']:>25.1f} / {row['p95_ms']:.1f}")
    meta = {
        "runs": args.runs,
        "token_rate": args.token_rate,
        "model": str(args.model or "tiny (random weights)"),
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
