"""The code predictor's passes as a TorchScript trace on a CPU (model/tts/traced_predictor.py): the same codes as the
layer-by-layer passes over a schedule whose row count changes (rows joining, one cancelled, greedy and seeded sampled
rows together), in float32 and in the CPU default (w8a8 with bfloat16 activations); a trace that fails or differs
turns the traces off with one warning and the same codes; TRACED_PREDICTOR and TORCH_COMPILE turn them off."""

from __future__ import annotations

import gc

import pytest
import torch

from qwen3_tts_server.config import Settings
from qwen3_tts_server.engine.model_manager import warm_up_model
from qwen3_tts_server.model import cpu_linear
from qwen3_tts_server.model.tts import traced_predictor
from qwen3_tts_server.model.tts.traced_predictor import PredictorTraces
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.server import build_registry
from qwen3_tts_server.testing.random_checkpoint import make_test_model
from step_schedule import SHORT, assert_same_frames, run_schedule

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cpu_default(checkpoint_dirs) -> Qwen3TTSModel:
    """The tiny CustomVoice model in w8a8 with bfloat16 activations, its traces off (each test makes its own)."""
    return Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], "cpu", "bfloat16", "w8a8", trace_predictor=False)


@pytest.fixture(scope="module")
def float32(checkpoint_dirs) -> Qwen3TTSModel:
    return Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], trace_predictor=False)


@pytest.fixture(scope="module")
def eager_schedules(cpu_default, float32) -> dict:
    return {"cpu_default": run_schedule(cpu_default), "float32": run_schedule(float32)}


def traced_schedule(model: Qwen3TTSModel):
    traces = PredictorTraces(model.talker.code_predictor, wanted=True)
    return run_schedule(model, traces=traces), traces


@pytest.mark.parametrize("precision", ["cpu_default", "float32"])
def test_traced_passes_give_the_layer_by_layer_frames(request, eager_schedules, precision, caplog):
    model = request.getfixturevalue(precision)
    with caplog.at_level("INFO", logger=traced_predictor.__name__):
        traced, traces = traced_schedule(model)
    assert traces.state == "on"
    assert traced.ends == eager_schedules[precision].ends
    assert_same_frames(traced, eager_schedules[precision])
    stepped = sorted({running for _, running, _ in traced.shapes})
    assert len(stepped) >= 3 and traces.row_counts == stepped, "each row count the schedule stepped was traced"
    made = [record.getMessage() for record in caplog.records]
    assert len(made) == len(stepped)
    if precision == "cpu_default":  # sizes recorded as operations: the trace made at two rows serves every count
        assert all("(the shared trace)" in message for message in made), made


def _chooses_other_codes(trace, inputs):
    return trace(*inputs) + 1


def _no_tracer(*_args, **_kwargs):
    raise RuntimeError("no tracer here")


@pytest.mark.parametrize(
    ("target", "replacement", "failure"),
    [
        ((traced_predictor, "_run"), _chooses_other_codes, "failed (TraceMismatch: a trace for 3 rows chose other"),
        ((torch.jit, "trace"), _no_tracer, "failed (RuntimeError: no tracer here)"),
    ],
)
def test_a_trace_that_differs_or_cannot_be_made_turns_the_traces_off(
    cpu_default, eager_schedules, monkeypatch, caplog, target, replacement, failure
):
    monkeypatch.setattr(*target, replacement)
    with caplog.at_level("WARNING"):
        traced, traces = traced_schedule(cpu_default)
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith("code predictor traces off: "), warnings
    assert traces.state.startswith(failure), traces.state
    assert traces.row_counts == [] and traces.predict(*[None] * 4) is None
    assert traced.ends == eager_schedules["cpu_default"].ends
    assert_same_frames(traced, eager_schedules["cpu_default"])


def test_traces_are_off_where_not_asked_for_compiled_or_not_traceable(checkpoint_dirs):
    compiled = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], compile=True)
    assert compiled.predictor_traces.state == "off (the frame step is compiled (TORCH_COMPILE))"
    assert not compiled.predictor_traces.active
    not_asked = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], trace_predictor=False).predictor_traces
    assert not_asked.state == "off (not asked for)" and not_asked.predict(*[None] * 4) is None
    # float32 layers reordered for oneDNN, as the real sizes' are (the tiny ones compute row by row): the tracer
    # refuses their operator ("unsupported input list type: Scalar?"), so the traces are off rather than failing
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpu_linear, "ONEDNN_MIN_WEIGHTS", 0)
        reordered = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"])
    assert any(isinstance(module, cpu_linear.PrepackedLinear) for module in reordered.talker.code_predictor.modules())
    reason = "off (its float32 layers are reordered for oneDNN, whose product a trace cannot record)"
    assert reordered.predictor_traces.state == reason
    speech = reordered.generate([SHORT], reordered.sampling(seed=1), max_frames=3)[0]
    assert speech.codes.shape == (3, reordered.config.talker.code_predictor.num_code_groups)


@pytest.mark.parametrize(("setting", "state", "rows"), [("auto", "on", [1]), ("off", "off (not asked for)", [])])
def test_traced_predictor_setting_reaches_the_hosted_model(checkpoint_dirs, setting, state, rows):
    """serve's loader takes TRACED_PREDICTOR; the warm-up's one-row synthesis makes the first trace."""
    config = Settings.load(models=str(checkpoint_dirs["custom_voice"]), device="cpu", traced_predictor=setting)
    registry = build_registry(config, "cpu", "float32", False)
    model = registry.hosted[0].manager.get()
    assert model.predictor_traces.state == state
    assert model.predictor_traces.row_counts == rows


def test_a_checkpoint_loaded_again_reuses_the_traces_its_last_load_made(tmp_path, caplog):
    """TorchScript never frees a trace's module types (some 100 MiB a load here, 200 MiB for the 0.6B): a checkpoint's
    next load reuses the traces its last load made, bound to its own weights, and an unloaded model's weights are
    released from them."""
    directory = make_test_model(tmp_path / "checkpoint", size="tiny", model_type="custom_voice", seed=11)  # its own key
    methods = torch.jit._state._python_cu.get_functions
    first = Qwen3TTSModel.load(directory, "cpu", "bfloat16", "w8a8")
    warm_up_model(first)
    traces = first.predictor_traces.kept_traces()
    made = len(methods())
    spoken = first.generate([SHORT, SHORT], first.sampling(seed=3), max_frames=4)
    del first
    gc.collect()
    for trace in traces:  # the unloaded model's weights released: empty placeholders in their place
        assert all(tensor.numel() == 0 for _, tensor in (*trace.named_parameters(), *trace.named_buffers()))
    with caplog.at_level("INFO", logger=traced_predictor.__name__):
        second = Qwen3TTSModel.load(directory, "cpu", "bfloat16", "w8a8")
        warm_up_model(second)
        again = second.generate([SHORT, SHORT], second.sampling(seed=3), max_frames=4)
    assert len(methods()) == made, "no trace made again"
    assert second.predictor_traces.state == "on" and second.predictor_traces.row_counts == [1, 2]
    reused = [record.getMessage() for record in caplog.records if "kept from an earlier load" in record.getMessage()]
    assert len(reused) == 2, [record.getMessage() for record in caplog.records]
    assert [speech.codes.tolist() for speech in again] == [speech.codes.tolist() for speech in spoken]
