"""`qwen3-tts-server bench`: the engine under concurrent streaming load, in process.

Every request makes the same number of frames (EOS suppressed). For each concurrency level the
requests are submitted together and consumed as streams; reported per level: time to first audio chunk
(p50/p95), per-stream speed (seconds of audio per wall second, x real time), aggregate seconds of audio
per second, and the longest time a joining prefill held running streams up.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..engine.jobs import SpeechJob
from ..engine.synthesis import Engine
from ..model.tts.prompt import SpeechInput
from ..model.tts.tts_model import Qwen3TTSModel
from ..model.tts.voice_prompt import VoicePrompt
from .peers import PeerResult
from .workload import BENCH_TEXT, percentile


@dataclass
class LevelResult:
    concurrency: int
    frames_per_stream: int
    ttfa_p50_ms: float
    ttfa_p95_ms: float
    stream_rtf_p50: float  # x real time, per stream
    stream_rtf_min: float  # the slowest stream's
    aggregate_rtf: float  # seconds of audio per wall second, all streams together
    wall_seconds: float
    longest_prefill_stall_ms: float


def bench_request(model: Qwen3TTSModel) -> SpeechInput:
    if model.model_type == "custom_voice":
        return SpeechInput(BENCH_TEXT, "English", speaker=model.speakers[0])
    if model.model_type == "voice_design":
        return SpeechInput(BENCH_TEXT, "English", instruct="A calm, clear narrator.")
    voice = VoicePrompt(
        id="bench",
        mode="x_vector",
        checkpoint=model.fingerprint,
        speaker_embedding=torch.randn(
            model.config.talker.stack.hidden_size, generator=torch.Generator().manual_seed(0)
        ),
    )
    return SpeechInput(BENCH_TEXT, "English", voice=voice)


async def _run_level(engine: Engine, model: Qwen3TTSModel, concurrency: int, frames: int) -> LevelResult:
    request = model.prompts.prepare(bench_request(model))

    async def one(seed: int) -> tuple[float, float, int]:
        job = SpeechJob(request, model.sampling(seed=seed), max_frames=frames, suppress_eos=True)
        submitted = time.perf_counter()
        first, made = None, 0
        async for chunk in engine.submit(job):
            first = first if first is not None else time.perf_counter() - submitted
            made += chunk.frames
        return first, time.perf_counter() - submitted, made

    engine.longest_prefill_stall = 0.0
    started = time.perf_counter()
    results = await asyncio.gather(*(one(seed) for seed in range(concurrency)))
    wall = time.perf_counter() - started
    seconds_per_stream = model.frames_to_seconds(frames)
    assert all(made == frames for _, _, made in results)
    ttfa = [first for first, _, _ in results]
    return LevelResult(
        concurrency=concurrency,
        frames_per_stream=frames,
        ttfa_p50_ms=round(1000 * statistics.median(ttfa), 1),
        ttfa_p95_ms=round(1000 * percentile(ttfa, 0.95), 1),
        stream_rtf_p50=round(statistics.median(seconds_per_stream / total for _, total, _ in results), 3),
        stream_rtf_min=round(min(seconds_per_stream / total for _, total, _ in results), 3),
        aggregate_rtf=round(concurrency * seconds_per_stream / wall, 3),
        wall_seconds=round(wall, 2),
        longest_prefill_stall_ms=round(1000 * engine.longest_prefill_stall, 1),
    )


def run_bench(
    model: Qwen3TTSModel,
    levels: list[int],
    frames: int,
    max_batch_size: int | None = None,
    cuda_graphs: bool = True,
    fused_kernels: str = "auto",
) -> tuple[list[LevelResult], dict[str, str]]:
    """Each level's figures, and the states after the run of the step's CUDA graphs (on, off or failed (reason)), of
    the code predictor's fused kernels and of its traced passes (on, off (why), failed (why))."""
    engine = Engine(
        model,
        max_batch_size=max_batch_size or max(levels),
        max_queue_depth=max(levels),
        cuda_graphs=cuda_graphs,
        fused_kernels=fused_kernels,
    ).start()

    async def all_levels() -> list[LevelResult]:
        await _run_level(engine, model, 1, 2)  # warm-up
        return [await _run_level(engine, model, level, frames) for level in levels]

    try:
        results = asyncio.run(all_levels())
        generator = engine.generator
        states = {"cuda_graphs": generator.graphs_state, "fused_kernels": generator.fused_state}
        return results, {**states, "traced_predictor": generator.traced_state}
    finally:
        engine.stop()


def peer_ratios(results: list[LevelResult], peer: PeerResult) -> list[dict]:
    """Ours against a peer at each level. A peer serves one request at a time: at N streams its aggregate is its
    one-stream speed, and the k-th request hears audio after k whole requests and its own first audio."""
    ratios = []
    for level in results:
        waits = [k * peer.request_p50_ms + peer.ttfa_p50_ms for k in range(level.concurrency)]
        ratios.append(
            {
                "concurrency": level.concurrency,
                "aggregate_x": round(level.aggregate_rtf / peer.rtf_p50, 2),
                "peer_ttfa_p50_ms": round(percentile(waits, 0.5), 1),
                "ttfa_p50_x": round(percentile(waits, 0.5) / level.ttfa_p50_ms, 2),
            }
        )
    return ratios


def write_results(
    results: list[LevelResult],
    meta: dict,
    json_path: Path,
    plot_path: Path | None,
    peers: list[PeerResult] = (),
) -> None:
    report = {"meta": meta, "results": [asdict(r) for r in results]}
    if peers:
        report["peers"] = [asdict(peer) for peer in peers]
        report["ratios"] = {peer.peer: peer_ratios(results, peer) for peer in peers}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    if plot_path is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [r.concurrency for r in results]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(levels, [r.ttfa_p50_ms for r in results], "o-", label="p50")
    left.plot(levels, [r.ttfa_p95_ms for r in results], "s--", label="p95")
    for peer in peers:
        waits = [r["peer_ttfa_p50_ms"] for r in report["ratios"][peer.peer]]
        left.plot(levels, waits, ":", label=f"{peer.peer} {peer.version} p50 (one at a time)")
    left.set(xscale="log", xlabel="concurrent streams", ylabel="time to first audio (ms)", title="TTFA")
    if peers:
        left.set_yscale("log")
    left.set_xticks(levels, [str(x) for x in levels])
    left.minorticks_off()
    left.legend()
    right.plot(levels, [r.aggregate_rtf for r in results], "o-", label="aggregate")
    right.plot(levels, [r.stream_rtf_p50 for r in results], "s--", label="per stream (p50)")
    for peer in peers:
        right.axhline(peer.rtf_p50, linestyle=":", color="black", label=f"{peer.peer} {peer.version}")
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set(xscale="log", xlabel="concurrent streams", ylabel="x real time", title="Throughput")
    right.set_xticks(levels, [str(x) for x in levels])
    right.minorticks_off()
    right.legend()
    figure.suptitle(f"qwen3-tts-server bench: {meta.get('model', '')} on {meta.get('device', '')}")
    figure.tight_layout()
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(plot_path, dpi=100)
    plt.close(figure)
