"""torch.compile of the frame step (TORCH_COMPILE), one decoder layer's halves at a time.

Between its matrix products a frame runs thousands of small operations (norms, rotations, activations, residuals)
one by one; compiled, each half of a layer around its attention is one fused kernel plus its matrix products.
Compiling layer by layer rather than the whole step ("regional" compilation) compiles each half once for all the
layers of a stack (their weights are the compiled code's inputs): seconds instead of minutes, which the whole
frame took. The attention and the KV cache's reads and writes stay eager, so the compiled code sees no span and
no positions: only the number of rows changes, and torch makes a dimension dynamic the second time it changes,
so the compile for two rows covers every batch size above one.

Compiled code is cached on disk by inductor (TORCHINDUCTOR_CACHE_DIR), so a restart skips most of the work. A
compile that fails (no C++ compiler, an unsupported operator) turns compilation off with one warning and the
step goes on eagerly with the same results.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from ..layers import DecoderStack, attention_inputs, layer_outputs

log = logging.getLogger(__name__)

RECOMPILE_LIMIT = 64  # compiled variants per function (stacks x row counts of 1 and more); torch's default is 8


class StepCompiler:
    """Swaps compiled halves into decoder stacks' `regions`; `enabled` falls to False on the first failure."""

    def __init__(self, backend: str | Callable = "inductor"):
        self.backend = backend
        self.enabled = True
        self.failure: str | None = None
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)

    def compile(self, stack: DecoderStack) -> None:
        stack.regions.before = self._wrap(attention_inputs)
        stack.regions.after = self._wrap(layer_outputs)

    def _wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        compiled = torch.compile(function, backend=self.backend)

        def call(layer: torch.nn.Module, *tensors: torch.Tensor) -> Any:
            if not self.enabled:
                return function(layer, *tensors)
            try:
                return compiled(layer, *tensors)
            except torch._dynamo.exc.TorchDynamoException as exc:  # compiling failed: nothing ran yet
                self.enabled = False
                cause = getattr(exc, "inner_exception", None) or exc  # the backend's own error, not its wrapper
                self.failure = f"{type(cause).__name__}: {(str(cause).strip().splitlines() or [''])[0]}"
                log.warning("torch.compile of the frame step failed (%s); stepping eagerly", self.failure)
                return function(layer, *tensors)

        return call


def compile_frame_step(talker: torch.nn.Module, backend: str | Callable = "inductor") -> StepCompiler:
    """Compile the frame step's layers of a talker (its own stack and its code predictor's); the compiling itself
    happens on each shape's first step (the model's warm-up runs them ahead: `engine.model_manager.warm_up_model`)."""
    compiler = StepCompiler(backend)
    compiler.compile(talker.model)
    compiler.compile(talker.code_predictor.model)
    return compiler
