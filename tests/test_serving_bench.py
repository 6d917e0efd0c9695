"""The serving benchmark (`bench-serving`, bench/serving.py): its simulated player and Poisson arrivals on known
answers, its summaries on made-up requests, and one short run against a live server."""

from __future__ import annotations

import asyncio
import json

import pytest

from qwen3_tts_server.bench.serving import (
    Level,
    Plan,
    Request,
    arrivals,
    build_report,
    highest_rate_held,
    play,
    requests_report,
    run_policy,
    summarize,
    table,
    write_report,
)
from qwen3_tts_server.testing.live_server import live_process


def test_chunks_arriving_early_never_underrun():
    assert play([(0.0, 0.5), (0.1, 0.5), (0.2, 0.5), (0.9, 0.5)]) == (0, 0.0)


def test_a_chunk_arriving_exactly_as_the_audio_ends_is_no_underrun():
    assert play([(1.0, 0.5), (1.5, 0.25), (1.75, 1.0)]) == (0, 0.0)  # sums exact in binary
    # 0.7 + 0.1 is 0.7999999999999999 in floats, and ten sums of 0.1 fall short of 1.0: neither counts
    assert play([(0.0, 0.7), (0.7, 0.1), (0.8, 0.5)]) == (0, 0.0)
    assert play([(0.0, 0.1)] + [(0.1 * k, 0.1) for k in range(1, 50)]) == (0, 0.0)


def test_a_late_chunk_is_one_underrun_stalled_for_its_gap():
    underruns, stalled = play([(2.0, 0.5), (2.75, 1.0)])
    assert underruns == 1 and stalled == pytest.approx(0.25)


def test_several_underruns_resume_from_each_arrival():
    # plays 0-1; late by 0.5 -> plays 1.5-1.7; 1.6 is early (ends 1.9); late by 1.1 at 3.0 -> plays 3.0-3.5
    underruns, stalled = play([(0.0, 1.0), (1.5, 0.2), (1.6, 0.2), (3.0, 0.5), (3.5, 0.1)])
    assert underruns == 2 and stalled == pytest.approx(0.5 + 1.1)


def test_a_single_chunk_or_none_never_underruns():
    assert play([(0.3, 4.0)]) == (0, 0.0)
    assert play([]) == (0, 0.0)


def test_poisson_arrivals_are_seeded_and_within_the_window():
    assert arrivals(5, 10, seed=3) == arrivals(5, 10, seed=3) != arrivals(5, 10, seed=4)
    times = arrivals(50, 200, seed=0)
    assert len(times) == pytest.approx(50 * 200, rel=0.05)  # 10,000 expected, sd 100
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 200


def request(*arrivals: float, error: str | None = None, seconds_each: float = 2.0) -> Request:
    """A request answered with a chunk of `seconds_each` of audio (16-bit, 24 kHz) at each of `arrivals`."""
    made = Request(sent=0.0, error=error)
    made.chunks = [(at, round(seconds_each * 48000)) for at in arrivals]
    made.finish(24000)
    return made


def test_a_level_summary_from_its_requests():
    answered = [request(0.010 * k, 2.0) for k in range(101)]  # first audio 0, 10, .., 1000 ms; last at 2 s
    level = summarize("after", "rate", 2.0, [*answered, request(0.5, error="http_503:server_busy")], wall=10.0)
    assert (level.requests, level.errors) == (102, {"http_503:server_busy": 1})
    assert (level.first_audio_p50_ms, level.first_audio_p95_ms, level.first_audio_p99_ms) == (500.0, 950.0, 990.0)
    assert level.last_audio_p95_s == 2.0 and level.achieved_rate == 10.1
    assert (level.underrun_share, level.underruns) == (0.0, 0)
    assert level.slowest_stream_rtf == 2.0  # 4 s of audio from 0 s to 2 s
    late = summarize("after", "burst", 4, [request(0.1, 3.1, 6.1, seconds_each=1.0), *answered[:3]], wall=1.0)
    assert (late.underrun_share, late.underruns, late.stalled_seconds) == (0.25, 2, 4.0)
    assert late.name == "burst 4"


def level(rate: float, p95_ms: float, underruns: int = 0, errors: int = 0) -> Level:
    return Level(
        "after", "rate", rate, 10, {"http_503:server_busy": errors} if errors else {}, p95_ms / 2, p95_ms, p95_ms,
        5.0, 0.1 if underruns else 0.0, underruns, 0.0, 1.0, 1.5, 10.0,
    )  # fmt: skip


def test_the_highest_rate_held_meets_the_goal_without_underrun_or_error():
    assert highest_rate_held([level(1, 40), level(2, 100), level(4, 101)], ttfa_goal_ms=100) == 2
    assert highest_rate_held([level(1, 40), level(2, 60, underruns=1), level(4, 90, errors=1)], 100) == 1
    assert highest_rate_held([level(1, 400)], 100) is None
    burst = Level("after", "burst", 16, 16, {}, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1)
    assert highest_rate_held([burst], 100) is None


def test_a_short_run_against_a_live_server(checkpoint_dirs, tmp_path):
    plan = Plan(rates=(2.0,), duration=1.5, burst=2, seed=0, timeout=60, burst_rounds=2)
    seen: list[Level] = []
    env = {"MAX_REQUEST_FRAMES": "12"}
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=env) as live:
        result = asyncio.run(run_policy(live.base, "after", plan, seen.append))
    assert [(run.level.kind, run.level.load) for run in result.runs] == [("rate", 2.0), ("burst", 2)] and len(seen) == 2
    assert result.runs[1].level.requests == 4 and result.server["device"] == "cpu"  # two rounds of two
    for run in result.runs:
        assert run.level.requests == len(run.requests) and not run.level.errors
        for made in run.requests:
            assert made.error is None and made.chunks, made
            assert sum(size for _, size in made.chunks) % 2 == 0 and made.audio_seconds > 0
            assert 0 < made.first_audio <= made.last_audio
    report = build_report([result], {"model": "tiny"}, ttfa_goal_ms=100)
    write_report(report, tmp_path / "serving.json", tmp_path / "serving.png")
    written = json.loads((tmp_path / "serving.json").read_text())
    assert set(written) == {"meta", "levels", "highest_rate_held", "p95_first_audio_ratios"}
    assert list(written["highest_rate_held"]) == ["after"]
    assert set(requests_report([result])) == {"after 2/s", "after burst 2"}
    assert (tmp_path / "serving.png").stat().st_size > 0
    assert "burst 2" in table(written)
