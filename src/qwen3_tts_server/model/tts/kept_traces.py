"""The code predictor's traces (`traced_predictor.py`) that a process keeps across loads of one checkpoint.

TorchScript registers a trace's module types, and their methods' graphs, in a process-wide compilation unit that never
frees them: some 100 MiB a load for the tiny test model, some 200 MiB for the 0.6B. A server that unloads an idle model
(`IDLE_TIMEOUT`) and loads it again grew so at every load. So the traces are kept, by the checkpoint and the settings
it was loaded with, and its next load reuses them: what they read (parameters, buffers, packed weights) is bound to
the new load's modules, and while no model holds them, to empty placeholders, so that an unloaded model's weights
are freed. Each row count's first step still checks a trace against the layer-by-layer passes, codes for codes.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Hashable, Iterator

import torch
from torch import nn

from ..quantization import quantized_engine

PACKED_LINEAR = "__torch__.torch.classes.quantized.LinearPackedParamsBase"

Slot = tuple[torch.ScriptObject, str, object]  # a traced module's attribute, and the placeholder it holds when released


class KeptTraces:
    """A checkpoint's traces: the shared one and those made for a row count of their own; held by one model at a
    time (`take`, `give_back`)."""

    def __init__(self) -> None:
        self.shared: torch.jit.ScriptModule | None = None
        self.own: dict[int, torch.jit.ScriptModule] = {}
        self.held = False
        self._slots: dict[int, list[Slot]] = {}  # by id() of the trace

    def keep(self, trace: torch.jit.ScriptModule, module: nn.Module, bind: bool = False) -> None:
        """Note what `trace` reads of `module` (the module it was made from, or with `bind` one of the same structure,
        whose state it reads from now on), to release it later."""
        slots: list[Slot] = []
        for target, name, value in _bound(trace, module):
            if bind:
                target.setattr(name, value)
            slots.append((target, name, _placeholder(value)))
        self._slots[id(trace)] = slots

    def bind(self, module: nn.Module) -> None:
        """Every kept trace reads `module`'s state (a module of the structure they were made from)."""
        for trace in self.traces():
            self.keep(trace, module, bind=True)

    def release(self) -> None:
        """Placeholders in place of every tensor and packed weight the traces read."""
        for slots in self._slots.values():
            for target, name, placeholder in slots:
                if placeholder is not None:
                    target.setattr(name, placeholder)

    def forget(self) -> None:
        self.shared = None
        self.own.clear()
        self._slots.clear()

    def traces(self) -> list[torch.jit.ScriptModule]:
        return [trace for trace in (self.shared, *self.own.values()) if trace is not None]


_KEPT: dict[Hashable, KeptTraces] = {}
_LOCK = threading.Lock()


def take(key: Hashable) -> KeptTraces | None:
    """The traces kept for `key` (made empty the first time), now held by the caller; None while another model holds
    them (the same checkpoint loaded twice at once: the second makes traces of its own, not kept)."""
    with _LOCK:
        kept = _KEPT.setdefault(key, KeptTraces())
        if kept.held:
            return None
        kept.held = True
        return kept


def give_back(kept: KeptTraces) -> None:
    """The model holding `kept` is gone: its weights are released from the traces, which wait for the next load."""
    kept.release()
    with _LOCK:
        kept.held = False


def _state(module: nn.Module) -> Iterator[tuple[str, object]]:
    """What a trace copies from a module: its parameters, buffers and TorchScript objects (packed weights)."""
    for name, tensor in (*module._parameters.items(), *module._buffers.items()):
        if tensor is not None:
            yield name, tensor
    for name, value in vars(module).items():
        if torch._C._jit_is_script_object(value):
            yield name, value


def _bound(trace: torch.jit.ScriptModule, module: nn.Module) -> Iterator[tuple[torch.ScriptObject, str, object]]:
    for path, submodule in module.named_modules():
        target = trace
        for part in filter(None, path.split(".")):
            target = getattr(target, part)
        for name, value in _state(submodule):
            yield target._c, name, value


def _placeholder(value: object) -> object:
    """An empty value of the same type; None for a TorchScript object of a kind without one (kept as it is)."""
    if isinstance(value, torch.Tensor):
        return torch.empty(0, dtype=value.dtype, device=value.device)
    if value._type().qualified_name() == PACKED_LINEAR:  # type: ignore[attr-defined]
        return _empty_packed_linear()
    return None


@functools.cache
def _empty_packed_linear() -> torch.ScriptObject:  # one for every slot: nothing runs while they are released
    with warnings.catch_warnings(), quantized_engine("fbgemm"):
        warnings.simplefilter("ignore", UserWarning)  # quantised tensors are deprecated for a later PyTorch
        return torch.ops.quantized.linear_prepack(torch.quantize_per_tensor(torch.zeros(1, 1), 1.0, 0, torch.qint8))
