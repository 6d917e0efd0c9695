"""A step schedule that exercises what a static step must get right: rows joining at different steps, a
cancelled row leaving a hole below running rows, greedy and seeded sampled rows together, cache growth."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from qwen3_tts_server.model.tts.generation import FrameGenerator
from qwen3_tts_server.model.tts.prompt import SpeechInput

ENGLISH = SpeechInput("Hello world, this is a test of the server.", "English", "Vivian")
CHINESE = SpeechInput("今天天气很好，我们去公园散步吧。", "Chinese", "Serena")
SHORT = SpeechInput("Yes.", "English", "Ryan")


@dataclass
class Schedule:
    frames: dict[str, list[np.ndarray]]  # by request name
    ends: dict[str, str]  # finish reason by request name
    shapes: list[tuple[int, int, int]]  # per step: static bucket, rows running, cache capacity
    generator: FrameGenerator


def run_schedule(model, **generator_options) -> Schedule:
    """Rows join at different steps, one is cancelled (leaving a hole below running rows), greedy and
    seeded sampled rows mix, one row runs past SPAN_STEP cache positions and grows the cache."""
    greedy = model.sampling().greedy()
    generator = FrameGenerator(model.talker, rows=6, initial_capacity=64, **generator_options)
    names: dict[int, str] = {}
    frames: dict[str, list] = {}
    ends: dict[str, str] = {}
    shapes = []

    def add(name, request, params, budget, suppress_eos=False):
        if model.model_type == "voice_design":
            request = replace(request, speaker=None, instruct=f"A voice for {name}.")
        row = generator.add(model.prompts.build(request), params, budget, suppress_eos)
        names[row] = name
        frames[name] = []

    add("long", ENGLISH, greedy, 150, suppress_eos=True)
    add("cancelled", CHINESE, model.sampling(seed=3), 40)
    add("sampled", CHINESE, model.sampling(seed=5, temperature=1.2), 60)
    step = 0
    while generator.active:
        if step == 3:
            generator.remove(1)
            del names[1]
        if step == 5:
            add("joins_hole", SHORT, greedy, 30)  # takes the cancelled row's place
            add("joins_end", ENGLISH, model.sampling(seed=11, top_k=5), 45)
            add("sixth", CHINESE, greedy, 20)
        shapes.append((generator.static_shape(generator.active)[0], len(generator.active), generator.cache.capacity))
        for frame in generator.step():
            frames[names[frame.row]].append(frame.codes.cpu().numpy())
            if frame.finished:
                ends[names[frame.row]] = frame.finished
        step += 1
    return Schedule(frames, ends, shapes, generator)


def assert_same_frames(got: Schedule, want: Schedule) -> None:
    assert got.frames.keys() == want.frames.keys()
    for name, frames in want.frames.items():
        np.testing.assert_array_equal(np.stack(got.frames[name]), np.stack(frames), err_msg=name)
