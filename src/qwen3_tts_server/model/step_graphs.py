"""CUDA graphs of static decoding steps: one graph per (row bucket, attention span), replayed each step. Shared by
the speech frame step (`model/tts/generation.py`) and the recogniser's token step (`model/asr/decoding.py`).

A speech frame is about a hundred small layer passes and sixteen sampling points, a recogniser's token a pass of its
decoder; launched one by one, the launches, not the arithmetic, set the speed. A static step reads only its
generator's persistent buffers and has shapes fixed by its key (the rows of a bucket, the first `bucket` rows, over a
span rounded up to `SPAN_STEP`), so a captured graph replays it exactly.

A graph is valid while the buffers it was captured on stay where they are: a grown KV cache, text buffer
or rotary table moves them, and the graphs captured before are dropped and captured again on use.
Capturing is safe mid-service: the warm-up pass before a capture runs with no row marked running, and a
step with nothing running changes no state a row depends on (tested on CPU). That also makes each new graph
checkable: its first replay, with no row running, must give the codes of the eager pass just before it.

Graphs must never cost a user more than the eager step: a capture that fails, or a first replay that
differs from the eager pass, turns graphs off for this generator with one warning (`state` says why), and
the eager static step goes on with the same results.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

import torch

log = logging.getLogger(__name__)

SPAN_STEP = 128  # a static step attends over a multiple of this many cache positions
StepOutputs = tuple[torch.Tensor, torch.Tensor]  # speech: the frames' codes (B, G) and each row's end (B,)
Step = Callable[[], StepOutputs]


class GraphBackend(Protocol):
    """How a step is warmed up, captured and replayed: CUDA graphs here; the tests inject others on a CPU."""

    def warm_up(self, step: Step) -> StepOutputs:
        """Run the step as it will be captured (lazy initialisation and buffer growth happen here)."""
        ...

    def capture(self, step: Step) -> tuple[Callable[[], None], StepOutputs]:
        """Record the step; returns its replay and the output buffers each replay writes."""
        ...

    def new_pool(self) -> None:
        """The graphs captured so far were dropped: later captures share a new memory pool."""
        ...


class CudaGraphBackend:
    """torch.cuda.CUDAGraph captures sharing one memory pool (graphs of one generator never run at once). A pool
    is not reused once its graphs are gone: PyTorch refuses a capture into a pool whose graphs were all freed
    while blocks of it live on (an internal assert, seen on an H100 when the KV cache grew)."""

    def __init__(self) -> None:
        self._pool = None

    def warm_up(self, step: Step) -> StepOutputs:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            outputs = step()
        torch.cuda.current_stream().wait_stream(side)
        return outputs

    def capture(self, step: Step) -> tuple[Callable[[], None], StepOutputs]:
        graph = torch.cuda.CUDAGraph()
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            outputs = step()
        return graph.replay, outputs

    def new_pool(self) -> None:
        self._pool = None


def batch_buckets(rows: int) -> tuple[int, ...]:
    """The row counts a static step runs: powers of two below `rows`, then `rows` itself."""
    return tuple(1 << i for i in range(rows.bit_length()) if 1 << i < rows) + (rows,)


def rounded_span(span: int) -> int:
    """A static step's attention span: `span` cache positions rounded up to a multiple of SPAN_STEP."""
    return -(-span // SPAN_STEP) * SPAN_STEP


@dataclass
class _Captured:
    replay: Callable[[], None]
    outputs: StepOutputs
    layout: tuple[int, ...]


class GraphMismatch(RuntimeError):
    """A new graph's first replay gave other outputs than the eager pass before it."""


class StepGraphs:
    """Captures and replays a generator's static steps. `layout()` names the buffers a capture depends on
    (their addresses); `quiet()` is a context in which no row is running."""

    def __init__(
        self,
        layout: Callable[[], tuple[int, ...]],
        quiet: Callable[[], AbstractContextManager],
        backend: GraphBackend | None = None,
        names: tuple[str, str] = ("codes", "ends"),
    ):
        self._layout = layout
        self._names = names  # the step's two outputs, as a mismatch names them
        self._quiet = quiet
        self._backend = backend or CudaGraphBackend()
        self._graphs: dict[tuple[int, int], _Captured] = {}
        self.failure: str | None = None  # why graphs were turned off, once they were
        self.captures = 0  # graphs captured so far, recaptures included

    def __len__(self) -> int:
        return len(self._graphs)

    @property
    def enabled(self) -> bool:
        return self.failure is None

    @property
    def state(self) -> str:
        """ "on", or "failed (reason)" once graphs were turned off."""
        return "on" if self.failure is None else f"failed ({self.failure})"

    def run(self, key: tuple[int, int], step: Step) -> StepOutputs:
        """The step for `key` = (bucket, span): replayed from its graph, captured (and checked) first if needed.
        The outputs are copies: every replay writes the graph's own output buffers again."""
        if not self.enabled:
            return step()
        captured = self._graphs.get(key)
        if captured is None or captured.layout != self._layout():
            try:
                captured = self._capture(step)
            except GraphMismatch as exc:
                return self._turn_off(f"replay differs from the eager step: {exc}", step)
            except Exception as exc:  # a backend that cannot capture must not stop synthesis
                return self._turn_off(f"capture failed: {type(exc).__name__}: {exc}", step)
            self._graphs[key] = captured
        captured.replay()
        codes, ended = captured.outputs
        return codes.clone(), ended.clone()

    def _turn_off(self, reason: str, step: Step) -> StepOutputs:
        log.warning("CUDA graphs off: %s; stepping without graphs (same results, slower)", reason)
        self.failure = reason
        self._graphs.clear()
        return step()

    def _capture(self, step: Step) -> _Captured:
        with self._quiet():
            eager = [tensor.clone() for tensor in self._backend.warm_up(step)]
            layout = self._layout()
            if any(captured.layout != layout for captured in self._graphs.values()):
                # Their buffers moved (every graph held was captured on the old ones): drop them all, and capture
                # into a new memory pool; the old one goes once nothing of it is referenced.
                self._graphs.clear()
                self._backend.new_pool()
            replay, outputs = self._backend.capture(step)
            self.captures += 1
            replay()
            for name, want, got in zip(self._names, eager, outputs, strict=True):
                if not torch.equal(want, got):
                    differing = int((want != got).sum())
                    raise GraphMismatch(f"{differing} of {want.numel()} {name} differ")
        return _Captured(replay, outputs, layout)


@contextmanager
def no_row_running(running: torch.Tensor) -> Iterator[None]:
    """Mark every row as not running for the duration (the running mask is restored after)."""
    saved = running.clone()
    running.zero_()
    try:
        yield
    finally:
        running.copy_(saved)
