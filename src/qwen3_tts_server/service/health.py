"""What /health reports: the model's state and device, memory, the engine's load, the voice library."""

from __future__ import annotations

import os

import torch

from ..engine.engine import Engine
from ..engine.model_manager import ModelManager
from ..model.tts_model import Qwen3TTSModel
from ..resources import resident_memory_bytes
from .voice_library import VoiceLibrary


def gpu_memory(model: Qwen3TTSModel | None) -> tuple[int, int] | None:
    """(allocated, reserved) bytes on the model's GPU; None on a CPU or with no model loaded."""
    if model is None or model.device.type != "cuda":
        return None
    return torch.cuda.memory_allocated(model.device), torch.cuda.memory_reserved(model.device)


def health_report(models: ModelManager, engine: Engine, library: VoiceLibrary) -> dict:
    model = models.loaded
    memory: dict[str, int | None] = {"rss_bytes": resident_memory_bytes()}
    gpu = gpu_memory(model)
    if gpu is not None:
        memory["gpu_allocated_bytes"], memory["gpu_reserved_bytes"] = gpu
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
