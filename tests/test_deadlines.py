"""The deadline scheduler's decisions on scripted listeners: what a listener holds, which rows skip a step, how many
waiting requests a step admits."""

from __future__ import annotations

import pytest

from qwen3_tts_server.engine.deadlines import (
    LEAD_SECONDS,
    URGENT_MARGIN,
    Listener,
    Outlook,
    admission_quota,
    rows_to_hold,
)


def test_a_listener_plays_at_real_time_from_its_first_chunk():
    listener = Listener()
    assert listener.holds(5.0) is None
    listener.delivered(0.08, now=10.0)
    listener.delivered(0.16, now=10.05)
    assert listener.holds(10.1) == pytest.approx(0.14)
    assert listener.holds(10.5) == pytest.approx(-0.26)  # ran dry 0.26 s ago


def outlook(row: int, holds: float | None, due_in: float = 0.1, interactive: bool = True, held=False) -> Outlook:
    return Outlook(row, interactive, holds, due_in, held)


def test_rows_ahead_skip_steps_only_while_another_is_urgent():
    ahead = outlook(0, holds=0.1 + URGENT_MARGIN + LEAD_SECONDS + 0.01)
    middling = outlook(1, holds=1.0)
    whole_file = outlook(2, holds=None, interactive=False)
    assert rows_to_hold([ahead, middling, whole_file]) == set(), "nothing urgent: every row steps"
    new_arrival = outlook(3, holds=None)
    assert rows_to_hold([ahead, middling, whole_file, new_arrival]) == {0, 2}
    running_dry = outlook(4, holds=0.1 + URGENT_MARGIN - 0.01)
    assert rows_to_hold([ahead, middling, whole_file, running_dry]) == {0, 2}
    held_whole_file = outlook(2, holds=None, interactive=False, held=True)
    assert rows_to_hold([ahead, held_whole_file, new_arrival]) == {0}, "a whole-file row skips every other step"
    # a chunk due later needs more held audio to be safe, and more still to be ahead
    assert outlook(5, holds=1.0, due_in=0.9).urgent and not outlook(6, holds=2.0, due_in=0.9).ahead


def test_admission_takes_as_many_prompts_as_the_listeners_can_wait_for():
    assert admission_quota(32, [], 0.05, 0.1) == 32, "no listener yet: all that fit in the rows"
    assert admission_quota(32, [outlook(0, holds=3.0)], None, 0.1) == 32, "no prefill measured yet"
    # 3.0 s held, the next chunk in 0.1 s, a step 0.1 s and the margin: 2.55 s for prompts of 0.1 s
    assert admission_quota(32, [outlook(0, holds=3.0), outlook(1, holds=None)], 0.1, 0.1) == 25
    assert admission_quota(8, [outlook(0, holds=3.0)], 0.1, 0.1) == 8
    # a listener about to run dry (or dry already) still lets in a step's worth of prompts
    assert admission_quota(32, [outlook(0, holds=0.2), outlook(1, holds=3.0)], 0.01, 0.1) == 10
    assert admission_quota(32, [outlook(0, holds=-1.0)], 0.01, 0.1) == 10
    assert admission_quota(32, [outlook(0, holds=-1.0)], 0.5, 0.1) == 1, "one a step however slow a prompt is"
    whole_file = outlook(1, holds=-5.0, interactive=False)
    assert admission_quota(32, [outlook(0, holds=3.0), whole_file], 0.1, 0.1) == 25, "whole-file rows wait"
