"""What the health report and the metrics read of a loaded model, a speech model or a transcriber alike."""

from __future__ import annotations

from typing import Protocol

import torch


class LoadedModel(Protocol):
    """What /health reports of a loaded model, a speech model or a transcriber."""

    @property
    def model_type(self) -> str: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def quantization_state(self) -> str: ...


def gpu_memory(model: LoadedModel | None) -> tuple[int, int] | None:
    """(allocated, reserved) bytes on the model's GPU; None on a CPU or with no model loaded."""
    if model is None or model.device.type != "cuda":
        return None
    return torch.cuda.memory_allocated(model.device), torch.cuda.memory_reserved(model.device)
