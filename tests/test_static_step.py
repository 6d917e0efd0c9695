"""The static step (fixed row buckets, rounded attention spans, masked rows) makes exactly the frames of the
eager step, whatever rows join, leave or sit idle inside a bucket."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qwen3_tts_server.model.step_graphs import SPAN_STEP, batch_buckets, no_row_running
from qwen3_tts_server.model.tts.generation import FrameGenerator
from step_schedule import CHINESE, ENGLISH, SHORT, assert_same_frames, run_schedule


def test_batch_buckets_are_powers_of_two_then_the_row_count():
    assert batch_buckets(1) == (1,)
    assert batch_buckets(16) == (1, 2, 4, 8, 16)
    assert batch_buckets(6) == (1, 2, 4, 6)
    assert batch_buckets(64) == (1, 2, 4, 8, 16, 32, 64)


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design"])
def test_static_step_makes_the_eager_frames_for_mixed_batches(models, kind):
    model = models[kind]
    eager = run_schedule(model, static=False)
    static = run_schedule(model, static=True)
    assert static.ends == eager.ends
    assert eager.ends["long"] == "length" and len(eager.frames["long"]) == 150
    assert eager.shapes[-1][2] >= 150 + SPAN_STEP // 2, "the long row grew the cache past its first capacity"
    assert {bucket for bucket, _, _ in eager.shapes} >= {1, 4, 6}
    assert any(running < bucket for bucket, running, _ in eager.shapes), "some bucket held rows that were not running"
    assert_same_frames(static, eager)
    assert "cancelled" not in eager.ends and len(eager.frames["cancelled"]) == 3


def test_static_step_shapes_depend_on_bucket_and_span_only(models):
    """A static step over rows 0 and 2 (row 1 free) runs the whole bucket of 4 with its free rows masked:
    their draw counters, frame counters and cache lengths stay put."""
    model = models["custom_voice"]
    generator = FrameGenerator(model.talker, rows=8, static=True)
    sampled = model.sampling(seed=1)
    for _ in range(3):
        generator.add(model.prompts.build(ENGLISH), sampled, 20)
    generator.remove(1)
    before = (generator.draws.clone(), generator.frames.clone(), generator.cache.length.clone())
    generator.step()
    running = torch.tensor([1, 0, 1, 0, 0, 0, 0, 0])
    assert torch.equal(generator.frames - before[1], running)
    assert torch.equal(generator.draws - before[0], running * 16)  # 15 sub-talker draws and one talker draw
    assert torch.equal(generator.cache.length - before[2], running)
    assert generator.cache.lengths == generator.cache.length.tolist()


def _frames_of(generator: FrameGenerator, before_step=lambda: None) -> dict[int, list]:
    frames: dict[int, list] = {}
    while generator.active:
        before_step()
        for frame in generator.step():
            frames.setdefault(frame.row, []).append(frame.codes.cpu().numpy())
    return frames


def _three_rows(model, **options) -> FrameGenerator:
    generator = FrameGenerator(model.talker, rows=4, static=True, **options)
    generator.add(model.prompts.build(ENGLISH), model.sampling(seed=2), 40, suppress_eos=True)
    generator.add(model.prompts.build(CHINESE), model.sampling().greedy(), 25)
    generator.add(model.prompts.build(SHORT), model.sampling(seed=9, top_p=0.5), 30)
    return generator


def test_a_step_with_no_row_running_changes_nothing_the_rows_depend_on(models):
    """What makes capturing a graph mid-service safe: its warm-up pass runs the bucket with every row marked
    not running, and the rows' frames come out exactly as without such passes."""
    model = models["custom_voice"]
    plain = _frames_of(_three_rows(model))
    meddled = _three_rows(model)

    def warm_up_pass():
        bucket, span = meddled.static_shape(meddled.active)
        state = (meddled.running, meddled.hidden, meddled.code0, meddled.seen, meddled.draws, meddled.frames)
        saved = [t.clone() for t in state]
        with no_row_running(meddled.running):
            meddled.static_frame(bucket, span)
        for before, after in zip(saved, state, strict=True):
            assert torch.equal(before, after)

    assert plain.keys() == {0, 1, 2}
    for row, frames in _frames_of(meddled, warm_up_pass).items():
        np.testing.assert_array_equal(np.stack(frames), np.stack(plain[row]))


def test_graph_capture_failure_falls_back_to_the_static_step(models, caplog):
    """Graphs asked for where they cannot be captured (here: no CUDA) warn once and step without them."""
    model = models["custom_voice"]
    plain = _frames_of(_three_rows(model))
    generator = _three_rows(model, graphs=True)
    with caplog.at_level("WARNING"):
        graphed = _frames_of(generator)
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "CUDA graphs off: capture failed" in caplog.records[0].message
    assert generator.graphs is not None and not generator.graphs.enabled and len(generator.graphs) == 0
    assert generator.graphs_state.startswith("failed (capture failed: ")
    for row, frames in graphed.items():
        np.testing.assert_array_equal(np.stack(frames), np.stack(plain[row]))
