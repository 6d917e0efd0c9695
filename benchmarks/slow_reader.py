"""Backpressure shown: listeners that take their audio at real time (phone lines) beside a client that takes it as
fast as it comes, with STREAM_BUFFER_SECONDS at its default (30) and with no bound (0).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/slow_reader.py [--model DIR] [--readers 4] [--seconds 120]

The engine runs in this process (the server's own, driven as the service drives it), so that its RSS is what the
audio held costs, without socket buffers in between. Each reader's job makes --frames frames (its end-of-speech
suppressed: a long text read to the end) and the reader takes a chunk only once it has played the audio before it.
The fast client runs back-to-back jobs of 100 frames, alone first, then beside the readers; its speed is audio
seconds made per second. Without --model it builds the tiny random-weight checkpoint, which generates many times
faster than real time on a CPU: a server far ahead of its listeners.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
from pathlib import Path

from qwen3_tts_server.engine.jobs import SpeechJob
from qwen3_tts_server.engine.synthesis import Engine
from qwen3_tts_server.model.tts.prompt import SpeechInput
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.resources import release_free_memory, resident_memory_bytes
from qwen3_tts_server.testing.random_checkpoint import make_test_model

OUT = Path(__file__).resolve().parent / "results" / "slow_reader.json"
READER_TEXT = SpeechInput("The line stays open while the listener hears every word.", "English", "Vivian")
FAST_TEXT = SpeechInput("A short answer for the fast client.", "English", "Ryan")


async def reader(
    engine: Engine, model: Qwen3TTSModel, frames: int, seed: int, stop: asyncio.Event, streams: list
) -> float:
    """A job taken at real time until `stop`: the audio seconds taken."""
    job = SpeechJob(model.prompts.prepare(READER_TEXT), model.sampling(seed=seed), max_frames=frames, suppress_eos=True)
    stream = engine.submit(job)
    streams.append(stream)
    started, taken = time.monotonic(), 0.0
    try:
        while not stop.is_set():
            await asyncio.sleep(max(0.0, started + taken - time.monotonic()))  # play what was taken before
            chunk = await anext(stream, None)
            if chunk is None:
                break
            taken += len(chunk.audio) / model.sample_rate
    finally:
        await stream.aclose()
    return taken


async def fast_client(engine: Engine, model: Qwen3TTSModel, seconds: float) -> float:
    """Back-to-back jobs of 100 frames for `seconds`: audio seconds made per second."""
    made, started = 0.0, time.monotonic()
    while time.monotonic() - started < seconds:
        job = SpeechJob(model.prompts.prepare(FAST_TEXT), model.sampling(seed=1), max_frames=100, suppress_eos=True)
        async for chunk in engine.submit(job):
            made += len(chunk.audio) / model.sample_rate
    return made / (time.monotonic() - started)


async def measure(engine: Engine, model: Qwen3TTSModel, args: argparse.Namespace) -> dict:
    alone = await fast_client(engine, model, args.alone_seconds)
    gc.collect()
    release_free_memory()
    stop, samples, began, streams = asyncio.Event(), [], time.monotonic(), []
    frame_mib = model.frames_to_seconds(1) * model.sample_rate * 4 / 2**20  # float32 samples

    async def sample() -> None:
        while not stop.is_set():
            # Audio made and not yet taken, held in the readers' queues (the engine's own handles: a benchmark's view).
            held = sum(stream._handle.frames_sent - stream._handle.frames_taken for stream in streams)
            samples.append(
                {
                    "t": round(time.monotonic() - began, 1),
                    "rss_mib": round(resident_memory_bytes() / 2**20, 1),
                    "held_audio_mib": round(held * frame_mib, 1),
                    "paused": engine.paused,
                }
            )
            await asyncio.sleep(1.0)

    sampling = asyncio.create_task(sample())
    readers = [asyncio.create_task(reader(engine, model, args.frames, n, stop, streams)) for n in range(args.readers)]
    await asyncio.sleep(args.seconds / 2)  # the readers are well under way before the fast client comes
    beside = await fast_client(engine, model, args.seconds / 2)
    stop.set()
    taken = await asyncio.gather(*readers)
    await sampling
    rss = [s["rss_mib"] for s in samples]
    return {
        "stream_buffer_seconds": engine.stream_buffer_seconds,
        "fast_client_x_real_time_alone": round(alone, 2),
        "fast_client_x_real_time_beside_readers": round(beside, 2),
        "readers_audio_seconds_taken": round(sum(taken), 1),
        "rss_mib_start": rss[0],
        "rss_mib_end": rss[-1],
        "rss_mib_growth": round(rss[-1] - rss[0], 1),
        "held_audio_mib_max": max(s["held_audio_mib"] for s in samples),
        "paused_streams_end": samples[-1]["paused"],
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a CustomVoice checkpoint (default: build the tiny random one)")
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--frames", type=int, default=3000, help="each reader's job (80 ms frames): 4 minutes")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--alone-seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = Qwen3TTSModel.load(args.model or make_test_model(Path(scratch) / "tiny", size="tiny"))
    runs = []
    for buffer in (30.0, 0.0):
        engine = Engine(model, stream_buffer_seconds=buffer).start(preload=True)
        try:
            runs.append(asyncio.run(measure(engine, model, args)))
        finally:
            engine.stop()
        gc.collect()
        release_free_memory()
    result = {"model": str(args.model or "tiny (random weights)"), "readers": args.readers, "runs": runs}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    for run in runs:
        print(json.dumps({key: value for key, value in run.items() if key != "samples"}))


if __name__ == "__main__":
    main()
