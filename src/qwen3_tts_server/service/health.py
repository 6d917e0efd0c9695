"""What /health reports: the model's state and device, memory, the engine's load, the voice library."""

from __future__ import annotations

import os

import torch

from ..engine.engine import Engine
from ..engine.model_manager import ModelManager
from .voice_library import VoiceLibrary


def resident_memory_bytes() -> int | None:
    """This process's resident set size (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def health_report(models: ModelManager, engine: Engine, library: VoiceLibrary) -> dict:
    model = models.loaded
    memory: dict[str, int | None] = {"rss_bytes": resident_memory_bytes()}
    if model is not None and model.device.type == "cuda":
        memory["gpu_allocated_bytes"] = torch.cuda.memory_allocated(model.device)
        memory["gpu_reserved_bytes"] = torch.cuda.memory_reserved(model.device)
    return {
        "status": "ok",
        "pid": os.getpid(),
        "model": {
            "state": models.state.value,
            "type": model.model_type if model else None,
            "device": str(model.device) if model else None,
            "dtype": str(model.dtype).removeprefix("torch.") if model else None,
            "loads": models.loads,
        },
        "memory": memory,
        "queue_depth": engine.waiting,
        "active_streams": engine.active,
        "max_batch_size": engine.max_batch_size,
        "voices": {"library": len(library.list()), "cached_prompts": len(library.cache)},
    }
