"""The GPU fast path on a CUDA device: graph replay makes the eager frames, graphs are recaptured when the
cache grows, the fused code predictor makes the layer-by-layer frames, streamed audio equals the offline decode, and
bfloat16 picks the codes float32 picks. Skipped where
there is no CUDA device. On the tiny checkpoint, and also on the one GPU_TEST_CHECKPOINT names (a CustomVoice
directory: tools/gpu_check.sh passes the 0.6B)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from qwen3_tts_server.bench.agreement import agreement, forced_predictions, greedy_reference
from qwen3_tts_server.engine.jobs import SpeechJob
from qwen3_tts_server.engine.synthesis import Engine
from qwen3_tts_server.model.asr.decoding import GreedyRows
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.sampling import stream_uniform
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.signals import voiced_glide
from step_schedule import ENGLISH, assert_same_frames, run_schedule
from test_recognition_service import wav_bytes

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


SPOKEN = [(0.8, 140.0), (2.5, 120.0), (1.2, 180.0), (3.0, 150.0)]  # clips of (seconds, pitch)
CHECKPOINTS = ["tiny"] + (["GPU_TEST_CHECKPOINT"] if os.environ.get("GPU_TEST_CHECKPOINT") else [])


@pytest.fixture(scope="module", params=CHECKPOINTS)
def gpu_directory(request, checkpoint_dirs) -> Path:
    if request.param == "tiny":
        return checkpoint_dirs["custom_voice"]
    return Path(os.environ["GPU_TEST_CHECKPOINT"])


@pytest.fixture(scope="module")
def gpu_model(gpu_directory) -> Qwen3TTSModel:
    model = Qwen3TTSModel.load(gpu_directory, device="cuda", dtype="float32")
    yield model
    del model
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_graph_replay_makes_the_static_step_frames(gpu_model, gpu_directory, dtype):
    """Replaying the captured step runs the very kernels of the static step: identical frames, in either dtype."""
    model = gpu_model if dtype == "float32" else Qwen3TTSModel.load(gpu_directory, device="cuda", dtype=dtype)
    static = run_schedule(model, static=True, graphs=False)
    graphed = run_schedule(model, static=True, graphs=True)
    graphs = graphed.generator.graphs
    assert graphed.generator.graphs_state == "on", "capture or its check fell back to the eager step"
    assert graphs.captures > len(graphs) > 0, "the cache grew past its first capacity: graphs were captured again"
    assert graphed.ends == static.ends
    assert_same_frames(graphed, static)


def test_static_step_makes_the_eager_frames(gpu_model, monkeypatch):
    """Float32 (TF32 off: its matrix products round differently with the row count): row buckets and rounded
    spans change no code on the GPU either."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    eager = run_schedule(gpu_model, static=False)
    static = run_schedule(gpu_model, static=True, graphs=False)
    assert static.ends == eager.ends
    assert_same_frames(static, eager)


def test_the_fused_predictor_in_the_graphs_makes_the_layer_by_layer_frames(gpu_model, monkeypatch):
    """Float32, TF32 off: the code predictor's fused kernels (checked on first use, then captured in the step's
    graphs) make the frames of its layer-by-layer passes."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    layer_by_layer = run_schedule(gpu_model, static=True, fused=False)
    fused = run_schedule(gpu_model, static=True)
    assert fused.generator.fused_state == "on" and fused.generator.graphs_state == "on"
    assert fused.ends == layer_by_layer.ends
    assert_same_frames(fused, layer_by_layer)


def test_the_recognisers_graphed_token_step_gives_the_exact_steps_tokens(both_families, monkeypatch):
    """Float32, TF32 off: four clips encoded and prefilled together, then decoded side by side by the static step
    replayed from CUDA graphs or by the step that runs exactly the running rows, give the tokens each gets alone."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    transcriber = Transcriber(load_asr_checkpoint(both_families["asr"], device="cuda"))
    waves = [heard_wave(wav_bytes(voiced_glide(seconds, pitch=pitch)), "clip") for seconds, pitch in SPOKEN]
    alone = [transcriber.transcribe([wave], ["English"], rows=1)[0].part_tokens for wave in waves]
    model = transcriber.model
    graphed, exact = transcriber.rows(4), GreedyRows(model.decoder, model.head, model.tokens.stop, 4, static=False)
    tokens = {}
    for name, rows in (("graphed", graphed), ("exact", exact)):
        monkeypatch.setattr(transcriber, "rows", lambda slots, graphs=None, rows=rows: rows)
        tokens[name] = [t.part_tokens for t in transcriber.transcribe(waves, ["English"] * 4, rows=4)]
    assert graphed.graphs_state == "on" and tokens["graphed"] == tokens["exact"] == alone


def test_random_streams_are_the_same_on_the_gpu():
    seeds = torch.tensor([0, 1, 7, 2**62 + 12345, -3] * 20)
    draws = torch.arange(100)
    assert torch.equal(stream_uniform(seeds.cuda(), draws.cuda()).cpu(), stream_uniform(seeds, draws))


def test_warm_up_captures_every_bucket_and_serving_replays_them(gpu_model):
    generator = FrameGenerator(gpu_model.talker, rows=8)
    assert generator.static and generator.graphs is not None
    held = generator.capture()
    assert held == 2 * len(generator.buckets) == generator.graphs.captures
    generator.add(gpu_model.prompts.build(ENGLISH), gpu_model.sampling(seed=1), 20, suppress_eos=True)
    frames = [f.codes for _ in range(20) for f in generator.step()]
    assert len(frames) == 20 and generator.graphs.captures == held, "a bucket-1 step at span 128 replays"
    alone = gpu_model.generate([ENGLISH], gpu_model.sampling(seed=1), max_frames=20, suppress_eos=True)[0].codes
    np.testing.assert_array_equal(torch.stack(frames).cpu().numpy(), alone)


def test_streamed_audio_equals_the_offline_decode(gpu_model):
    engine = Engine(gpu_model, max_batch_size=4).start(preload=True)

    async def stream():
        request = gpu_model.prompts.prepare(ENGLISH)
        job = SpeechJob(request, gpu_model.sampling(seed=3), max_frames=60, chunk_schedule=(1, 2, 4, 8))
        return [chunk async for chunk in engine.submit(job)]

    try:
        chunks = asyncio.run(stream())
    finally:
        engine.stop()
    assert engine.generator.graphs_state == "on"
    codes = np.concatenate([c.codes for c in chunks])
    audio = np.concatenate([c.audio for c in chunks])
    assert np.abs(audio - gpu_model.decode(codes)).max() <= 1e-4


def test_bfloat16_picks_the_codes_float32_picks(gpu_model, gpu_directory):
    """Teacher forced along float32's greedy frames, bfloat16's argmax agrees on almost every code (about 98% on
    a CPU; a broken kernel or dtype path agrees on few)."""
    reference = greedy_reference(gpu_model, 64)
    bfloat16 = Qwen3TTSModel.load(gpu_directory, device="cuda", dtype="bfloat16")
    agreed = agreement(forced_predictions(bfloat16, reference), reference)
    assert agreed["codebook0"] >= 0.9 and agreed["all_codes"] >= 0.9, agreed
