"""CUDA graphs of the static frame step: one graph per (row bucket, attention span), replayed each step.

A frame is about a hundred small layer passes and sixteen sampling points; launched one by one, the
launches, not the arithmetic, set the speed. The static step (`FrameGenerator._frame`) reads only the
generator's persistent buffers and has shapes fixed by its key, so a captured graph replays it exactly.

A graph is valid while the buffers it was captured on stay where they are: a grown KV cache, text buffer
or rotary table moves them, and the graphs captured before are dropped and captured again on use.
Capturing is safe mid-service: the warm-up pass before a capture runs with no row marked running, and a
step with nothing running changes no state a row depends on (tested on CPU). A capture that fails turns
graphs off for this generator with a warning; the eager static step goes on with the same results.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

StepOutputs = tuple[torch.Tensor, torch.Tensor]  # the frames' codes (B, G) and each row's end (B,)


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    outputs: StepOutputs
    layout: tuple[int, ...]


class StepGraphs:
    """Captures and replays a generator's static steps. `layout()` names the buffers a capture depends on
    (their addresses); `quiet()` is a context in which no row is running."""

    def __init__(self, layout: Callable[[], tuple[int, ...]], quiet: Callable[[], AbstractContextManager]):
        self._layout = layout
        self._quiet = quiet
        self._graphs: dict[tuple[int, int], _Captured] = {}
        self._pool = None
        self.enabled = True
        self.captures = 0  # graphs captured so far, recaptures included

    def __len__(self) -> int:
        return len(self._graphs)

    def run(self, key: tuple[int, int], step: Callable[[], StepOutputs]) -> StepOutputs:
        """The step for `key` = (bucket, span): replayed from its graph, captured first if needed. The outputs
        are copies: every replay writes the graph's own output buffers again."""
        if not self.enabled:
            return step()
        captured = self._graphs.get(key)
        if captured is None or captured.layout != self._layout():
            try:
                captured = self._capture(step)
            except Exception as exc:  # a backend that cannot capture must not stop synthesis
                log.warning("CUDA graph capture failed (%s); stepping without graphs", exc)
                self.enabled = False
                self._graphs.clear()
                return step()
            self._graphs[key] = captured
        captured.graph.replay()
        codes, ended = captured.outputs
        return codes.clone(), ended.clone()

    def _capture(self, step: Callable[[], StepOutputs]) -> _Captured:
        with self._quiet():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step()  # warm-up: lazy initialisation and buffer growth happen here, not in the capture
            torch.cuda.current_stream().wait_stream(side)
            layout = self._layout()
            stale = [key for key, captured in self._graphs.items() if captured.layout != layout]
            for key in stale:  # their buffers moved: free their memory before capturing more
                del self._graphs[key]
            graph = torch.cuda.CUDAGraph()
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                outputs = step()
        self.captures += 1
        return _Captured(graph, outputs, layout)


@contextmanager
def no_row_running(running: torch.Tensor) -> Iterator[None]:
    """Mark every row as not running for the duration (the running mask is restored after)."""
    saved = running.clone()
    running.zero_()
    try:
        yield
    finally:
        running.copy_(saved)
