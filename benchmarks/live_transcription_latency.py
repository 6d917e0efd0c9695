"""Live transcription on this CPU (issue 32): sessions fed at real time from a recorded call, each utterance cut by
the server's voice activity and transcribed by the official streaming algorithm with our bounded passes, in the
recognition engine beside each other.

The call: sentences spoken by espeak-ng, each followed by a pause, over and over. The model: 0.6B Qwen3-ASR
random weights (`make-test-model --type asr --size 0.6b`), in the server's default precision for a CPU (w8a8,
bfloat16 activations where the CPU multiplies bfloat16; `--quantize` and `--dtype` choose another); every pass
decodes exactly `--tokens` tokens (no stop token ends a row), so every pass does the same work whatever the random
model says.

Figures:
- per-chunk latency (the chunk's last sample fed, at real time, to its partial out; the partial says where the audio
  it heard ends), p50 and p95, in the session's
  first 10 s, around 60 s and around `--seconds` (the goal: flat), for `--flat-sessions` sessions at once;
- the most sessions at once at real time with p95 <= 1 s, from `--sessions` runs of `--sweep-seconds` each;
- side by side, one pass of the official algorithm as its code runs it (all the call's audio so far re-fed, the
  prefix the output so far) at 10 s, 60 s and `--seconds` into the call, against one pass of ours at the same time.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/live_transcription_latency.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from qwen3_tts_server.audio.voice_activity import VoiceActivitySettings
from qwen3_tts_server.bench.asr import HeldOpen
from qwen3_tts_server.config.models import ModelSettings
from qwen3_tts_server.engine.recognition import RecognitionEngine, load_transcriber
from qwen3_tts_server.model.asr.loading import PREFILL_WEIGHTS
from qwen3_tts_server.model.asr.streaming import IncrementalPasses, RecomputedPasses, StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16
from qwen3_tts_server.resources import collapse_into_huge_pages, huge_pages_usable
from qwen3_tts_server.service.recognition.live import LiveSession, LiveTranscript
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "live_transcription_latency.json"
RATE = 16000
FEED_SECONDS = 0.1  # audio appended per feed, at real time
SENTENCES = [
    "Thank you for calling, how can I help you today?",
    "I would like to check the status of my order, please.",
    "It was placed last Tuesday and it has not arrived yet.",
    "Could you tell me the order number printed on the receipt?",
    "Sure, it is four seven two nine one eight.",
    "Thank you, one moment while I look that up for you.",
    "The parcel left our warehouse this morning and should arrive tomorrow.",
    "That is great news, thank you very much for your help.",
]


def recorded_call(seconds: float, folder: Path) -> np.ndarray:
    """The sentences spoken in turn, each followed by a pause of 1.0 to 1.6 s, until `seconds` of audio."""
    spoken = []
    for index, text in enumerate(SENTENCES):
        path = folder / f"s{index}.wav"
        subprocess.run(["espeak-ng", "-s", "160", "-w", str(path), text], check=True)
        samples, rate = sf.read(path, dtype="float32")
        spoken.append(soxr.resample(samples, rate, RATE).astype(np.float32))
    pieces, total, index = [], 0, 0
    while total < seconds * RATE:
        pause = np.zeros(int((1.0 + 0.2 * (index % 4)) * RATE), np.float32)
        pieces += [spoken[index % len(spoken)], pause]
        total += len(pieces[-2]) + len(pause)
        index += 1
    return np.concatenate(pieces)[: int(seconds * RATE)]


def percentile(values: list[float], share: float) -> float | None:
    return round(float(np.percentile(values, share)), 3) if values else None


async def session_latencies(engine: RecognitionEngine, call: np.ndarray, offset: float, seconds: float,
                            settings: StreamingSettings, started: float) -> list[tuple[float, float]]:  # fmt: skip
    """One session fed `seconds` of the call from `offset` at real time: (session second of the chunk's end, latency)
    for every partial."""
    session = await LiveSession(engine, RATE, "English", "", VoiceActivitySettings(), 600.0, settings).start()
    step, begin = int(FEED_SECONDS * RATE), int(offset * RATE)
    audio = np.roll(call, -begin)[: int(seconds * RATE)]
    found: list[tuple[float, float]] = []

    async def read() -> None:
        while (event := await session.events.get()) is not None:
            if isinstance(event, LiveTranscript) and not event.final:  # dated by the end of the audio it heard
                found.append((event.heard_until, time.monotonic() - (started + event.heard_until)))

    reader = asyncio.create_task(read())
    for index, start in enumerate(range(0, len(audio), step)):
        await asyncio.sleep(max(0.0, started + (index + 1) * FEED_SECONDS - time.monotonic()))
        session.append(audio[start : start + step])
    await session.close()
    await reader
    return found


async def sessions_at_once(engine: RecognitionEngine, call: np.ndarray, count: int, seconds: float,
                           settings: StreamingSettings) -> list[list[tuple[float, float]]]:  # fmt: skip
    started = time.monotonic()
    offsets = [7.3 * index for index in range(count)]  # each session at another point of the call
    runs = [session_latencies(engine, call, offset, seconds, settings, started) for offset in offsets]
    return await asyncio.gather(*runs)


def window(latencies: list[list[tuple[float, float]]], low: float, high: float) -> dict:
    values = [latency for session in latencies for at, latency in session if low <= at < high]
    return {"from_s": low, "to_s": high, "partials": len(values), "p50_s": percentile(values, 50),
            "p95_s": percentile(values, 95)}  # fmt: skip


def one_pass(passes, heard: np.ndarray, prefix: str, budget: int) -> float:
    started = time.perf_counter()
    passes.run(heard, prefix, budget)
    return time.perf_counter() - started


def official_against_ours(transcriber: Transcriber, call: np.ndarray, marks: list[float], tokens: int) -> list[dict]:
    """At each mark: one pass as the official code runs it (the whole call so far re-fed; its prefix the text a
    pass adds, `tokens` - 5 a chunk, since the start) beside one of ours in the utterance under way there (its
    finished blocks kept from the passes before it)."""
    rows = []
    words = " ".join(SENTENCES).split()
    for mark in marks:
        heard = call[: int(mark * RATE)]
        chunks = int(mark / 2)
        prefix_tokens = max(0, (tokens - 5) * (chunks - 1))
        prefix = " ".join(words[i % len(words)] for i in range(prefix_tokens))  # about a token a word
        official = one_pass(RecomputedPasses(transcriber, "", "English"), heard, prefix, tokens)
        utterance = _utterance_at(call, mark)
        ours_passes = IncrementalPasses(transcriber, "", "English")
        for end in range(2 * RATE, len(utterance), 2 * RATE):  # the passes before: the kept blocks
            ours_passes.prepare(utterance[:end], "")
        ours_prefix = " ".join(words[: max(0, (tokens - 5) * (len(utterance) // (2 * RATE) - 1))])
        ours = one_pass(ours_passes, utterance, ours_prefix, tokens)
        rows.append({"at_s": mark, "official_pass_s": round(official, 3), "ours_pass_s": round(ours, 3),
                     "official_audio_s": round(len(heard) / RATE, 1), "ours_audio_s": round(len(utterance) / RATE, 1),
                     "official_prefix_words": prefix_tokens})  # fmt: skip
        print(f"pass at {mark:g} s: official {official:.2f} s, ours {ours:.2f} s", file=sys.stderr, flush=True)
    return rows


def _utterance_at(call: np.ndarray, mark: float) -> np.ndarray:
    """The audio of the utterance under way at `mark` (from the end of the last pause before it), at least 2 s."""
    silent = np.abs(call[: int(mark * RATE)]) < 1e-4
    quiet_run = 0
    start = 0
    for index in range(len(silent) - 1, -1, -1):
        quiet_run = quiet_run + 1 if silent[index] else 0
        if quiet_run >= RATE // 2:
            start = index + quiet_run
            break
    start = min(start, int(mark * RATE) - 2 * RATE)
    return call[max(0, start) : int(mark * RATE)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="0.6b", choices=["tiny", "0.6b"])
    parser.add_argument(
        "--quantize", default="auto", choices=["auto", "none", "int8", "int4", "w8a8"], help="as QUANTIZE"
    )
    parser.add_argument(
        "--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="the activations', as DTYPE"
    )
    parser.add_argument("--prefill-weights", default="auto", choices=PREFILL_WEIGHTS, help="as PREFILL_WEIGHTS")
    parser.add_argument("--huge-pages", default="auto", choices=["auto", "off"], help="as HUGE_PAGES")
    parser.add_argument("--tokens", type=int, default=12, help="tokens every pass decodes")
    parser.add_argument("--seconds", type=float, default=300.0, help="the flat run's session length")
    parser.add_argument("--flat-sessions", type=int, default=1)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--sweep-seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    settings = StreamingSettings(max_new_tokens=args.tokens)
    # as the server resolves QUANTIZE and DTYPE for a transcriber on this CPU
    precision = ModelSettings(quantize=args.quantize, dtype=args.dtype).precision("cpu", cpu_multiplies_bfloat16())
    dtype, quantize = precision.dtype, precision.quantize
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        call = recorded_call(max(args.seconds, args.sweep_seconds) + 30.0, scratch)
        directory = make_asr_test_model(scratch / "asr", size=args.size, model_type="asr", seed=0)
        loaded = load_transcriber(directory, "cpu", dtype, quantize, prefill_weights=args.prefill_weights)
        transcriber = HeldOpen(loaded.model)
        if args.huge_pages == "auto" and huge_pages_usable():  # as the server does after a load
            collapse_into_huge_pages()
        for warm_up in (IncrementalPasses, RecomputedPasses):  # every kernel's first call, before any timing
            one_pass(warm_up(transcriber, "", "English"), call[: 10 * RATE], "", args.tokens)
        marks = [mark for mark in sorted({10.0, 60.0, args.seconds}) if mark <= len(call) / RATE - 2]
        side_by_side = official_against_ours(transcriber, call, marks, args.tokens)
        engine = RecognitionEngine(transcriber).start()
        try:
            flat = asyncio.run(sessions_at_once(engine, call, args.flat_sessions, args.seconds, settings))
            windows = [window(flat, 0, 10), window(flat, 50, 70), window(flat, args.seconds - 20, args.seconds)]
            print(f"flat ({args.flat_sessions} at once): {windows}", file=sys.stderr, flush=True)
            drafts = {"drafted": engine.rows.drafted, "confirmed": engine.rows.confirmed}
            sweep = []
            for count in args.sessions:
                latencies = asyncio.run(sessions_at_once(engine, call, count, args.sweep_seconds, settings))
                row = {"sessions": count, **window(latencies, 0, args.sweep_seconds)}
                row["real_time"] = row["p95_s"] is not None and row["p95_s"] <= 1.0
                sweep.append(row)
                print(f"{count} at once: {row}", file=sys.stderr, flush=True)
        finally:
            engine.stop()
    result = {
        "benchmark": "live_transcription_latency",
        "workload": f"{args.size} random weights, {quantize or 'none'}, {dtype} activations, prefill weights "
        f"{args.prefill_weights}, huge pages {args.huge_pages}, {args.tokens} tokens a "
        "pass, 2 s chunks, sessions fed at real time in 100 ms pieces from an espeak-ng call (sentences and "
        "pauses), Silero VAD",
        "flat": {"sessions": args.flat_sessions, "windows": windows},
        # each pass's guess at its first tokens (the pass before's unfixed ones), and how many the model confirmed
        "flat_draft_tokens": drafts,
        "sweep": sweep,
        "most_sessions_at_real_time": max((row["sessions"] for row in sweep if row["real_time"]), default=0),
        "official_against_ours": side_by_side,
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
