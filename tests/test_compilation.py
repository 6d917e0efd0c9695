"""TORCH_COMPILE: the compiled frame step makes exactly the eager step's frames in float32, compiles everything at
warm-up (nothing later, whatever the row count), and falls back to eager steps with one warning when compiling
fails."""

from __future__ import annotations

import logging

import pytest
from torch._dynamo.utils import counters

from qwen3_tts_server.config import Settings
from qwen3_tts_server.engine.model_manager import warm_up_model
from qwen3_tts_server.model.tts.compilation import compile_frame_step
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from step_schedule import assert_same_frames, run_schedule

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def compiled(checkpoint_dirs) -> Qwen3TTSModel:
    model = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], compile=True)
    warm_up_model(model)
    return model


@pytest.mark.parametrize("static", [False, True])
def test_compiled_step_makes_the_eager_frames_in_float32(models, compiled, static):
    """Greedy and sampled rows joining, leaving and sharing steps (the mixed schedule), code for code."""
    eager = run_schedule(models["custom_voice"], static=static)
    got = run_schedule(compiled, static=static)
    assert compiled.compiler.enabled, compiled.compiler.failure
    assert got.ends == eager.ends
    assert_same_frames(got, eager)


def test_warm_up_compiles_every_shape_a_step_will_take(compiled):
    """After the warm-up (one row, then two), steps of 1 to 6 rows at growing spans compile nothing more."""
    graphs = counters["stats"]["unique_graphs"]
    assert graphs > 0
    schedule = run_schedule(compiled, static=False)
    assert {running for _, running, _ in schedule.shapes} >= {1, 2, 3, 4, 5}
    assert counters["stats"]["unique_graphs"] == graphs


def test_a_failed_compile_falls_back_to_eager_with_one_warning(checkpoint_dirs, models, caplog):
    def no_compiler(graph, inputs):
        raise RuntimeError("no C++ compiler here")

    model = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"])
    model.compiler = compile_frame_step(model.talker, backend=no_compiler)
    with caplog.at_level(logging.WARNING, logger="qwen3_tts_server.model.tts.compilation"):
        got = run_schedule(model, static=False)
    assert not model.compiler.enabled
    assert "no C++ compiler here" in model.compiler.failure
    assert len([r for r in caplog.records if "stepping eagerly" in r.getMessage()]) == 1
    assert_same_frames(got, run_schedule(models["custom_voice"], static=False))


SWITCHES = [(None, False), ("auto", False), ("1", True), ("off", False), ("on", True)]


@pytest.mark.parametrize(("value", "compiled"), SWITCHES)
def test_torch_compile_setting_is_a_switch_off_by_default(clean_env, monkeypatch, value, compiled):
    if value is not None:
        monkeypatch.setenv("TORCH_COMPILE", value)
    assert Settings.load().resolved_compile() is compiled


def test_torch_compile_setting_refuses_what_is_not_a_switch(clean_env, monkeypatch):
    monkeypatch.setenv("TORCH_COMPILE", "reduce-overhead")
    with pytest.raises(Exception, match="TORCH_COMPILE='reduce-overhead'"):
        Settings.load()
