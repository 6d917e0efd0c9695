"""What a GPU user gets when the fast path fails: the eager step or the unquantised model, one warning, and
/health saying so. The failures are injected here, on a CPU: a graph backend that replays the step by running it
again (what a CUDA graph does) and can be made to fail its capture or to replay other codes, and quantised
layers that raise or compute nonsense."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
import torch
from torch import nn

from in_process import make_app, run_in_app
from qwen3_tts_server.engine import synthesis as engine_module
from qwen3_tts_server.model.cpu_linear import PrepackedLinear, RowwiseLinear
from qwen3_tts_server.model.quantization import Int8Linear, PackedLinear
from qwen3_tts_server.model.step_graphs import Step, StepOutputs
from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from step_schedule import ENGLISH, assert_same_frames, run_schedule

pytestmark = pytest.mark.slow


class EagerReplay:
    """A graph backend for the CPU: the 'graph' runs the step again and writes the captured output buffers, as a
    replay does. `corrupt` adds to the codes of every replay; `refuse` makes every capture raise."""

    def __init__(self, corrupt: int = 0, refuse: bool = False):
        self.corrupt, self.refuse = corrupt, refuse
        self.captures = self.replays = self.pools = 0

    def warm_up(self, step: Step) -> StepOutputs:
        return step()

    def capture(self, step: Step):
        if self.refuse:
            raise RuntimeError("operation not permitted when stream is capturing")
        outputs = step()
        self.captures += 1

        def replay() -> None:
            self.replays += 1
            codes, ends = step()
            outputs[0].copy_(codes + self.corrupt)
            outputs[1].copy_(ends)

        return replay, outputs

    def new_pool(self) -> None:
        self.pools += 1


def test_replayed_graphs_make_the_static_step_frames(models):
    """The capture, check and replay bookkeeping on the mixed schedule: graphs are checked, replayed and
    captured again when the cache grows, and every frame is the static step's."""
    model = models["custom_voice"]
    static = run_schedule(model, static=True, graphs=False)
    backend = EagerReplay()
    graphed = run_schedule(model, static=True, graphs=True, graph_backend=backend)
    graphs = graphed.generator.graphs
    assert graphed.generator.graphs_state == "on"
    assert graphs.captures > len(graphs) > 0, "the cache grew: graphs were captured again"
    assert backend.pools >= 1, "the graphs captured on the old buffers were dropped with their memory pool"
    assert backend.replays > graphs.captures, "steps replayed their graphs"
    assert graphed.ends == static.ends
    assert_same_frames(graphed, static)


def test_a_graph_whose_first_replay_differs_turns_graphs_off(models, caplog):
    model = models["custom_voice"]
    static = run_schedule(model, static=True, graphs=False)
    with caplog.at_level("WARNING"):
        graphed = run_schedule(model, static=True, graphs=True, graph_backend=EagerReplay(corrupt=1))
    warnings = [r.message for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "CUDA graphs off: replay differs from the eager step" in warnings[0]
    state = graphed.generator.graphs_state
    assert state.startswith("failed (replay differs from the eager step: ") and " codes differ)" in state
    assert len(graphed.generator.graphs) == 0
    assert_same_frames(graphed, static)  # no corrupted code reached a row


def _engine_generators(monkeypatch, backend: EagerReplay) -> None:
    """The engine's generators step statically on the CPU with `backend` for graphs, unless graphs are off."""

    def generator(talker, rows, graphs=None, fused=None, traces=None):
        static = {"static": True, "graphs": graphs is not False, "graph_backend": backend}
        return FrameGenerator(talker, rows, **static, fused=fused, traces=traces)

    monkeypatch.setattr(engine_module, "FrameGenerator", generator)


SPEECH = {"model": "tts-1", "voice": "Vivian", "input": ENGLISH.text, "response_format": "wav", "seed": 4}
SPEECH |= {"language": "English", "stream": False}


async def _speak_between_health_reads(_client, http):
    before = (await http.get("/health")).json()
    speech = await http.post("/v1/audio/speech", json=SPEECH)
    return before, speech, (await http.get("/health")).json()


@pytest.fixture(scope="module")
def eager_speech(models) -> bytes:
    """The request as the plain CPU engine (eager step, no graphs) speaks it."""
    _, speech, health = run_in_app(make_app(models["custom_voice"]), _speak_between_health_reads)
    assert speech.status_code == 200 and health["cuda_graphs"] == "off"
    return speech.content


@pytest.mark.parametrize(
    ("variable", "backend", "state"),
    [
        ("true", EagerReplay(), "on"),
        ("false", EagerReplay(), "off"),
        ("true", EagerReplay(corrupt=3), "failed (replay differs from the eager step: "),
        ("true", EagerReplay(refuse=True), "failed (capture failed: RuntimeError: operation not permitted "),
    ],
)
def test_health_says_whether_the_step_replays_as_graphs(
    models, eager_speech, clean_env, monkeypatch, variable, backend, state
):
    """CUDA_GRAPHS (the earlier server's name) turns graphs off; a failed capture or check falls back to the eager
    step; the request is spoken either way, with the same samples."""
    clean_env.setenv("CUDA_GRAPHS", variable)
    _engine_generators(monkeypatch, backend)
    before, speech, after = run_in_app(make_app(models["custom_voice"]), _speak_between_health_reads)
    assert before["cuda_graphs"] is None  # no generator before the first request
    assert after["cuda_graphs"].startswith(state), after["cuda_graphs"]
    assert after["fused_kernels"] == "off (not on CUDA)"  # FUSED_KERNELS=auto: CUDA only, however Triton is run
    assert (backend.replays > backend.captures) == (state == "on"), "steps replayed beyond each graph's check"
    assert speech.status_code == 200
    audio, rate = sf.read(io.BytesIO(speech.content), dtype="float32")
    assert rate == 24000 and len(audio) >= 5 * 1920 and np.abs(audio).max() > 0.01
    assert speech.content == eager_speech


def test_health_says_when_the_fused_kernels_are_not_asked_for(models, clean_env, monkeypatch):
    clean_env.setenv("FUSED_KERNELS", "off")
    _engine_generators(monkeypatch, EagerReplay())
    _, speech, after = run_in_app(make_app(models["custom_voice"]), _speak_between_health_reads)
    assert after["fused_kernels"] == "off (not asked for)" and speech.status_code == 200


def _broken_kernel(*_args):
    raise RuntimeError("no kernel image is available for execution on the device")


@pytest.mark.parametrize(
    ("multiply", "reason"),
    [
        (_broken_kernel, "int8 failed on cpu: RuntimeError: no kernel image is available"),
        (lambda _self, rows: torch.zeros(rows.shape[0], _self.out_features, dtype=rows.dtype), "away from the float"),
    ],
)
def test_a_quantisation_that_fails_leaves_the_model_in_its_dtype(
    checkpoint_dirs, models, monkeypatch, caplog, multiply, reason
):
    monkeypatch.setattr(Int8Linear, "multiply", multiply)
    with caplog.at_level("WARNING"):
        model = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], quantize="int8")
    warnings = [r.message for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith("quantization off: ") and "running in float32" in warnings[0]
    assert model.quantization is None and model.quantization_state.startswith("failed (")
    assert reason in model.quantization_state
    # On a CPU the float32 layers are batch-invariant (model/cpu_linear.py; the tiny model's row by row): none is
    # left quantised.
    kinds = nn.Linear | PackedLinear | PrepackedLinear | RowwiseLinear
    layers = [m for m in model.talker.modules() if isinstance(m, kinds)]
    assert layers and all(isinstance(m, RowwiseLinear) and m.weight.dtype == torch.float32 for m in layers)
    float_model = models["custom_voice"]
    got, want = (m.generate([ENGLISH], m.sampling(seed=2), max_frames=10)[0].codes for m in (model, float_model))
    np.testing.assert_array_equal(got, want)

    async def scenario(_client, http):
        await http.post("/v1/audio/speech", json={"model": "tts-1", "voice": "Vivian", "input": "Hi."})
        return (await http.get("/health")).json()

    assert run_in_app(make_app(model), scenario)["model"]["quantization"] == model.quantization_state
