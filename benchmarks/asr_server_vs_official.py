"""Recognition served: concurrent uploads to a real `serve` process against the official qwen-asr 0.0.6 on the same
random-weight checkpoint, in one run; then speech and recognition requests mixed on that server.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/asr_server_vs_official.py --official-python DIR/bin/python
        [--seconds 30] [--tokens 100] [--concurrency 1 4 16] [--quantize int8] [--out FILE]

DIR is the ASR oracle environment (tools/asr_oracle_venv.sh DIR). Every clip is decoded to `--tokens` tokens: the
server's MAX_TRANSCRIPTION_TOKENS, and the official package's min_new_tokens (benchmarks/asr_speed_vs_official.py,
run in that environment first, alone). A random-weight model never ends its text early, which the run checks.

1. Uploads: N clients at once each POST a 30 s WAV to /v1/audio/transcriptions with stream=true (the server hosts
   a 0.6B transcriber and a 0.6B CustomVoice model, both quantised by `--quantize`). For each N: time to the first
   `transcript.text.delta` (median, slowest), time to `transcript.text.done` (median, slowest), and the aggregate
   real-time factor (N clips' audio over the wall time until the last is done). The official package has no
   server and no streaming: its figure is one transcribe() call batching the N clips, the same work done its
   fastest way, its first text arriving with its last.
2. Mixed: four speech streams (/v1/audio/speech, pcm, 125 frames: 10 s of audio each) alone, four uploads alone,
   then both at once; each stream's real-time factor and first audio, each upload's time, alone and mixed.

The figures go to benchmarks/results/asr_server_vs_official.json (or `--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import soundfile as sf

from qwen3_tts_server.bench.asr import SAMPLE_RATE, bench_clips
from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model
from qwen3_tts_server.testing.random_checkpoint import make_test_model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "asr_server_vs_official.json"
SPEECH_FRAMES = 125  # 10 s at 12.5 frames a second
SPEECH_RATE = 24000
MIXED = 4
SPEECH = {"input": "The meeting moved to three o'clock on Thursday.", "voice": "ryan", "response_format": "pcm",
          "stream": True}  # fmt: skip


def wav(clip) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, clip, SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


async def upload(http: httpx.AsyncClient, audio: bytes) -> dict:
    """One streamed transcription: seconds to its first delta and to `done`."""
    started = time.perf_counter()
    first = done = None
    data = {"model": "whisper-1", "stream": "true", "language": "en"}
    async with http.stream("POST", "/v1/audio/transcriptions", data=data, files={"file": ("c.wav", audio)}) as answer:
        answer.raise_for_status()
        async for line in answer.aiter_lines():
            if not line.startswith("data: "):
                continue
            kind = json.loads(line.removeprefix("data: "))["type"]
            if kind == "transcript.text.delta" and first is None:
                first = time.perf_counter() - started
            elif kind == "transcript.text.done":
                done = time.perf_counter() - started
    assert first is not None and done is not None, "a stream without text or without its end"
    return {"first_delta": first, "done": done}


async def speak(http: httpx.AsyncClient, seed: int) -> dict:
    """One streamed speech request: seconds to its first audio, and its real-time factor."""
    started = time.perf_counter()
    first, audio = None, 0
    async with http.stream("POST", "/v1/audio/speech", json=SPEECH | {"seed": seed}) as answer:
        answer.raise_for_status()
        async for chunk in answer.aiter_bytes():
            first = first or (chunk and time.perf_counter() - started)
            audio += len(chunk)
    seconds = time.perf_counter() - started
    return {"first_audio": first, "seconds": seconds, "real_time_factor": audio / 2 / SPEECH_RATE / seconds}


def summary(values: list[float], higher_is_slower: bool = True) -> dict:
    """The median and the slowest client's figure (a time's highest, a real-time factor's lowest)."""
    slowest = max(values) if higher_is_slower else min(values)
    return {"median": round(statistics.median(values), 2), "slowest": round(slowest, 2)}


async def uploads(http: httpx.AsyncClient, clips: list[bytes], seconds: float) -> dict:
    started = time.perf_counter()
    results = await asyncio.gather(*(upload(http, clip) for clip in clips))
    wall = time.perf_counter() - started
    return {
        "clients": len(clips),
        "first_delta_s": summary([result["first_delta"] for result in results]),
        "done_s": summary([result["done"] for result in results]),
        "wall_s": round(wall, 2),
        "real_time_factor": round(len(clips) * seconds / wall, 2),
    }


async def mixed(http: httpx.AsyncClient, clips: list[bytes]) -> dict:
    """Speech alone, uploads alone, then both together."""

    async def both() -> tuple[list[dict], list[dict]]:
        speech = asyncio.gather(*(speak(http, 100 + index) for index in range(MIXED)))
        heard = asyncio.gather(*(upload(http, clip) for clip in clips[:MIXED]))
        return await asyncio.gather(speech, heard)

    def speech_figures(results: list[dict]) -> dict:
        return {"first_audio_s": summary([result["first_audio"] for result in results]),
                "real_time_factor": summary([result["real_time_factor"] for result in results], False)}  # fmt: skip

    speech_alone = await asyncio.gather(*(speak(http, index) for index in range(MIXED)))
    uploads_alone = await asyncio.gather(*(upload(http, clip) for clip in clips[:MIXED]))
    speech_mixed, uploads_mixed = await both()
    return {
        "speech_alone": speech_figures(speech_alone),
        "speech_mixed": speech_figures(speech_mixed),
        "uploads_alone_done_s": summary([result["done"] for result in uploads_alone]),
        "uploads_mixed_done_s": summary([result["done"] for result in uploads_mixed]),
    }


async def served(base: str, clips: list[bytes], args: argparse.Namespace) -> dict:
    async with httpx.AsyncClient(base_url=base, timeout=3600) as http:
        await upload(http, wav(bench_clips(1, 2.0)[0]))  # warm-up: first calls of every kernel
        check = await http.post("/v1/audio/transcriptions", data={"response_format": "verbose_json", "language": "en"},
                                files={"file": ("c.wav", clips[0])})  # fmt: skip
        check.raise_for_status()
        tokens = [len(segment["tokens"]) for segment in check.json()["segments"]]
        assert tokens == [args.tokens] and check.headers.get("X-Parts-Cut") == "1", (tokens, check.headers)
        rows = []
        for count in args.concurrency:
            rows.append(await uploads(http, clips[:count], args.seconds))
            print(f"ours x{count}: {rows[-1]}", file=sys.stderr, flush=True)
        together = await mixed(http, clips)
        print(f"mixed: {together}", file=sys.stderr, flush=True)
    return {"uploads": rows, "mixed": together}


def official(python: str, directory: Path, args: argparse.Namespace, scratch: Path) -> dict:
    out = scratch / "official.json"
    command = [python, str(ROOT / "benchmarks" / "asr_speed_vs_official.py"), "--model", str(directory),
               "--seconds", str(args.seconds), "--tokens", str(args.tokens), "--variants", "--out", str(out),
               "--concurrency", *map(str, args.concurrency)]  # fmt: skip
    subprocess.run(command, check=True)
    return {row["clips"]: row["seconds"] for row in json.loads(out.read_text())["rows"] if row["engine"] == "official"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official-python", required=True, help="the python of the ASR oracle environment")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--quantize", default="int8", choices=["none", "int8", "int4"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    clips = [wav(clip) for clip in bench_clips(max(max(args.concurrency), MIXED), args.seconds)]
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        asr = make_asr_test_model(scratch / "asr", size="0.6b", model_type="asr", seed=0)
        speech = make_test_model(scratch / "speech", size="0.6b")
        official_seconds = official(args.official_python, asr, args, scratch)
        env = {"QUANTIZE": args.quantize, "MAX_TRANSCRIPTION_TOKENS": str(args.tokens), "PRELOAD_MODEL": "true",
               "MAX_REQUEST_FRAMES": str(SPEECH_FRAMES), "AUDIO_CACHE_MAX": "0", "IDLE_TIMEOUT": "0",
               "TEXT_NORMALIZE": "false", "LOG_LEVEL": "warning"}  # fmt: skip
        with live_process("serve", speech, "--model", str(asr), env=env, ready_within=900) as live:
            ours = asyncio.run(served(live.base, clips, args))
    for row in ours["uploads"]:
        row["official_batched_s"] = official_seconds[row["clients"]]
        row["official_real_time_factor"] = round(row["clients"] * args.seconds / row["official_batched_s"], 2)
        row["ours_vs_official"] = round(row["official_batched_s"] / row["wall_s"], 2)
    result = {
        "benchmark": "asr_server_vs_official",
        "workload": f"0.6b random weights, {args.seconds:g} s clips, {args.tokens} tokens each; ours {args.quantize} "
        "served (streamed uploads), the official float32 transcribe() batching the clips",
        **ours,
    }
    print(f"{'clients':>7} {'1st delta p50':>13} {'slowest':>8} {'done p50':>8} {'slowest':>8} {'x RT':>6} "
          f"{'official':>8} {'x RT':>6} {'ratio':>6}")  # fmt: skip
    for row in ours["uploads"]:
        print(f"{row['clients']:7d} {row['first_delta_s']['median']:13.2f} {row['first_delta_s']['slowest']:8.2f} "
              f"{row['done_s']['median']:8.2f} {row['done_s']['slowest']:8.2f} {row['real_time_factor']:6.2f} "
              f"{row['official_batched_s']:8.2f} {row['official_real_time_factor']:6.2f} "
              f"{row['ours_vs_official']:6.2f}")  # fmt: skip
    print(json.dumps(ours["mixed"], indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
