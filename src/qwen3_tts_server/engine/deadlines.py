"""The deadline scheduler's decisions, from how much audio each listener holds (`synthesis.py` applies them).

A streamed request's listener starts playing at its first chunk and plays at real time, so at any moment it holds the
audio delivered less the time since that chunk (a request's segments, each a row of its own, share one). A row is urgent
when its listener would run dry before its next chunk (or has no audio yet: a new arrival waits for its first frame).
While any row is urgent, the rows whose listeners hold plenty skip steps, and whole-file rows (no listener: batch
narration) every other step, so that a step costs less and the urgent rows' frames come sooner. Waiting requests are
admitted together, as many as a step's time allows, or the time the listeners hold beyond their next chunk if that is
longer. Holding a row changes none of its frames (`FrameGenerator.pause`).
"""

from __future__ import annotations

from dataclasses import dataclass

URGENT_MARGIN = 0.25  # seconds of audio a listener should still hold when its next chunk arrives
LEAD_SECONDS = 1.5  # seconds beyond that margin past which a listener's row may skip steps for urgent ones


@dataclass
class Listener:
    """A stream as its listener hears it: playing at real time from its first chunk."""

    started: float | None = None  # time.monotonic() of the first chunk
    sent: float = 0.0  # seconds of audio delivered

    def delivered(self, seconds: float, now: float) -> None:
        if self.started is None:
            self.started = now
        self.sent += seconds

    def holds(self, now: float) -> float | None:
        """Seconds of audio not yet played (negative: the listener ran dry that long ago); None before the first
        chunk."""
        return None if self.started is None else self.sent - (now - self.started)


@dataclass(frozen=True)
class Outlook:
    """A stepping row as the scheduler sees it."""

    row: int
    interactive: bool  # streamed to a listener (else a whole-file job)
    holds: float | None  # Listener.holds
    due_in: float  # seconds until its next chunk, stepping every step
    held: bool = False  # skipped the step before

    @property
    def urgent(self) -> bool:
        return self.interactive and (self.holds is None or self.holds < self.due_in + URGENT_MARGIN)

    @property
    def ahead(self) -> bool:
        """It can skip steps while others are urgent: a whole-file row every other step (it never starves), a
        listener's while it holds plenty (it steps again as it plays down to that)."""
        if not self.interactive:
            return not self.held
        return self.holds is not None and self.holds > self.due_in + URGENT_MARGIN + LEAD_SECONDS


def rows_to_hold(outlooks: list[Outlook]) -> set[int]:
    """The rows that skip this step: those ahead, while a row is urgent."""
    if not any(outlook.urgent for outlook in outlooks):
        return set()
    return {outlook.row for outlook in outlooks if outlook.ahead}


def admission_quota(limit: int, outlooks: list[Outlook], prompt_seconds: float | None, step_seconds: float) -> int:
    """How many waiting requests to prefill before this step, at least 1 and at most `limit`: as many as take
    (`prompt_seconds` each, measured) one step's time, or longer if every listener with audio can wait that long
    before its next chunk is late. A new arrival has no audio at all: holding it back a step to spare a listener
    less than a step's wait would trade its first audio for nothing the listener hears."""
    spare = [o.holds - o.due_in for o in outlooks if o.interactive and o.holds is not None]
    if not spare or not prompt_seconds:
        return limit
    fits = max(step_seconds, min(spare) - step_seconds - URGENT_MARGIN) / prompt_seconds
    return max(1, min(limit, int(fits)))
