"""The code predictor's fifteen passes as a TorchScript trace on a CPU (`TRACED_PREDICTOR`): the same operations as
the layer-by-layer passes (`CodePredictor.sample`), run by TorchScript's interpreter with no Python between them.

A frame's predictor work is some 6,500 small operations (five layers a pass, fifteen passes, sampling): on a CPU,
Python's calls between them took as long as their arithmetic (on the 2-core AVX-512 machine of the benchmarks, the
0.6B's predictor took 80 ms a frame eagerly and 45 ms traced, in w8a8 with bfloat16 activations). torch.compile cannot
take fbgemm's packed weights (an opaque object: every linear layer breaks its graph), and a compiled C++ loop would
be a second implementation of the model; a trace records the model's own code. TorchScript is deprecated upstream but
present in the pinned PyTorch; a PyTorch without it leaves the layer-by-layer passes on.

A trace is exact for the shapes it was made with, and mostly for others: it records sizes as operations, but bakes
what Python decides from them (a single row's product path, a loop over rows). So one trace, made at two rows, serves
every row count it is checked for, and a row count it does not reproduce gets a trace of its own. Checked means: on
the first step of each row count, the traced codes must equal the layer-by-layer passes' (which are that step's
result). A trace that cannot be made, fails to run or differs turns the traces off with one warning, and the
layer-by-layer passes go on. Traced passes compute every sampling step in full (no host hints: `RowSampling`), which
chooses the same codes. The process keeps a load's traces for the checkpoint's next load (`kept_traces.py`): TorchScript
never frees a trace's types.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
import weakref
from collections.abc import Hashable

import torch
from torch import nn

from ..cpu_linear import PrepackedLinear
from . import kept_traces
from .predictor_path import PredictorPath
from .sampling import RowSampling
from .talker import CodePredictor

log = logging.getLogger(__name__)

TRACE_ROWS = 2  # the row count the shared trace is made at (one row would take single-row paths)


class TraceMismatch(RuntimeError):
    """A trace made for these very inputs chose other codes than the layer-by-layer passes."""


class _Passes(nn.Module):
    """`CodePredictor.sample` over tensors alone, what a trace takes (the sampling settings without host hints)."""

    def __init__(self, predictor: CodePredictor):
        super().__init__()
        self.predictor = predictor

    def forward(
        self,
        talker_hidden: torch.Tensor,
        code0_embedding: torch.Tensor,
        uniforms: torch.Tensor,
        do_sample: torch.Tensor,
        temperature: torch.Tensor,
        top_k: torch.Tensor,
        top_p: torch.Tensor,
    ) -> torch.Tensor:
        sampling = RowSampling(do_sample, temperature, top_k, top_p)
        return self.predictor.sample(talker_hidden, code0_embedding, sampling, uniforms)


Inputs = tuple[torch.Tensor, ...]


def _trace(passes: _Passes, inputs: Inputs) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        # what the tracer says of sizes taken as Python values, which the check covers; and its own deprecation
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.trace(passes, inputs, check_trace=False)


def _run(trace: torch.jit.ScriptModule, inputs: Inputs) -> torch.Tensor:
    # The plain interpreter: the optimising one spends its first runs profiling (a second each) for no gain here.
    with torch.jit.optimized_execution(False):
        return trace(*inputs)


class PredictorTraces(PredictorPath):
    """A model's traces of its code predictor's passes, shared by its generators. `state`: "on", "off (why)" or
    "failed (why)"; `predict` returns None whenever the layer-by-layer passes must run instead."""

    def __init__(self, predictor: CodePredictor, wanted: bool, compiled: bool = False, key: Hashable | None = None):
        """`key`: the checkpoint and the settings it was loaded with, whose traces the process keeps for its next
        load (`kept_traces.py`); None keeps none."""
        self.predictor = predictor
        self._passes = _Passes(predictor)
        self._shared: torch.jit.ScriptModule | None = None  # made at TRACE_ROWS rows
        self._by_rows: dict[int, torch.jit.ScriptModule] = {}  # the checked trace of each row count seen
        self._lock = threading.Lock()
        self._made: list[torch.jit.ScriptModule] = []  # the traces this load made (not kept from an earlier one)
        self.failure: str | None = None
        self.off_reason = self._off_reason(predictor, wanted, compiled)
        self._kept = kept_traces.take(key) if key is not None and self.off_reason is None else None
        if self._kept is not None:
            weakref.finalize(self, kept_traces.give_back, self._kept).atexit = False
            try:
                self._kept.bind(self._passes)
            except (AttributeError, RuntimeError) as exc:  # not the structure they were made from: made anew
                log.warning("kept code predictor traces not reused: %s", exc)
                self._kept.forget()
            self._shared = self._kept.shared

    @staticmethod
    def _off_reason(predictor: CodePredictor, wanted: bool, compiled: bool) -> str | None:
        if not wanted:
            return "not asked for"
        if compiled:
            return "the frame step is compiled (TORCH_COMPILE)"
        if predictor.model.norm.weight.device.type != "cpu":
            return "not on a CPU (the step replays as CUDA graphs there)"
        if not hasattr(torch.jit, "trace"):
            return "this PyTorch has no TorchScript tracer"
        if any(isinstance(module, PrepackedLinear) for module in predictor.modules()):
            # their operator takes a list of optional scalars, which the tracer cannot record
            return "its float32 layers are reordered for oneDNN, whose product a trace cannot record"
        return None

    def kept_traces(self) -> list[torch.jit.ScriptModule]:
        """The traces the process keeps of this checkpoint for its next load (none when it keeps none)."""
        return self._kept.traces() if self._kept is not None else []

    @property
    def row_counts(self) -> list[int]:
        """The row counts with a checked trace."""
        return sorted(self._by_rows)

    @torch.inference_mode()
    def predict(
        self, talker_hidden: torch.Tensor, code0_embedding: torch.Tensor, sampling: RowSampling, uniforms: torch.Tensor
    ) -> torch.Tensor | None:
        """As `CodePredictor.sample`, traced: codes (B, G-1), or None while traces are off. A row count's first step
        runs the layer-by-layer passes and checks a trace against them."""
        if not self.active:
            return None
        inputs = (talker_hidden, code0_embedding, uniforms, *_settings(sampling))
        trace = self._by_rows.get(len(talker_hidden))
        if trace is not None:
            return _run(trace, inputs)
        want = self.predictor.sample(talker_hidden, code0_embedding, sampling, uniforms)
        with self._lock:
            try:
                self._check(inputs, want)
            except Exception as exc:  # a trace that cannot be made, run or trusted must not stop synthesis
                self.failure = f"{type(exc).__name__}: {exc}"
                self._shared = None
                self._by_rows.clear()
                if self._kept is not None:
                    self._kept.forget()
                log.warning("code predictor traces off: %s; the layer-by-layer passes run (same codes)", self.failure)
        return want

    def _traced(self, inputs: Inputs) -> torch.jit.ScriptModule:
        trace = _trace(self._passes, inputs)
        self._made.append(trace)
        if self._kept is not None:
            self._kept.keep(trace, self._passes)
        return trace

    def _check(self, inputs: Inputs, want: torch.Tensor) -> None:
        """Find the trace that gives these inputs' codes `want`: the shared one, else one made for their row count."""
        rows = len(inputs[0])
        started = time.perf_counter()
        if self._shared is None:
            self._shared = self._traced(tuple(torch.cat([t[:1]] * TRACE_ROWS) for t in inputs))
            if self._kept is not None:
                self._kept.shared = self._shared
        if _reproduces(self._shared, inputs, want):
            self._by_rows[rows] = self._shared
        else:
            own = self._kept.own.get(rows) if self._kept is not None else None
            if own is None or not _reproduces(own, inputs, want):
                own = self._traced(inputs)
                if not _reproduces(own, inputs, want):
                    raise TraceMismatch(f"a trace for {rows} rows chose other codes than the layer-by-layer passes")
                if self._kept is not None:
                    self._kept.own[rows] = own
            self._by_rows[rows] = own
        trace = self._by_rows[rows]
        shared = "the shared trace" if trace is self._shared else "a trace of its own"
        if self._kept is not None and not any(trace is made for made in self._made):
            shared += ", kept from an earlier load"
        log.info("code predictor traced for %d rows (%s) in %.2f s", rows, shared, time.perf_counter() - started)


def _settings(sampling: RowSampling) -> Inputs:
    return sampling.do_sample, sampling.temperature, sampling.top_k, sampling.top_p


def _reproduces(trace: torch.jit.ScriptModule, inputs: Inputs, want: torch.Tensor) -> bool:
    try:
        return torch.equal(_run(trace, inputs), want)
    except RuntimeError:  # a size the trace baked in (a loop over rows, say) does not fit these inputs
        return False
