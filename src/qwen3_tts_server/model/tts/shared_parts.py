"""Modules that checkpoints hold byte for byte alike, loaded once per process: the 12 Hz speech tokenizer (codec
decoder and encoder) is the same file in every 12 Hz checkpoint. A part lives while a loaded model holds it; the
last one unloaded frees it."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class PartKey:
    digest: str  # SHA-256 of the file the part is read from
    part: str  # "decoder", "encoder"
    device: str
    dtype: torch.dtype


class SharedParts:
    def __init__(self) -> None:
        self._parts: weakref.WeakValueDictionary[PartKey, nn.Module] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()  # one load of a part, however many models ask for it at once

    def get(self, key: PartKey, load: Callable[[], nn.Module]) -> nn.Module:
        """The part, loaded by `load` unless a loaded model holds it already."""
        with self._lock:
            part = self._parts.get(key)
            if part is None:
                part = load()
                self._parts[key] = part
            return part

    def held(self) -> list[PartKey]:
        """The parts loaded now."""
        return list(self._parts.keys())


SHARED_PARTS = SharedParts()
