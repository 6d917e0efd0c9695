"""What every benchmark request speaks, and how its timings are summarised; shared by `bench` and the peers'
processes, so it imports nothing beyond the standard library."""

from __future__ import annotations

BENCH_TEXT = "The benchmark sentence is long enough to give the talker a realistic prompt to work from."


def percentile(values: list[float], share: float) -> float:
    """The value at `share` (0..1) of the sorted values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]
