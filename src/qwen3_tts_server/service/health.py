"""What /health reports: the model's state and device, memory, the engine's load and state, the output cache,
the voice library."""

from __future__ import annotations

import asyncio
import os

import torch

from ..config import Settings
from ..engine.engine import Engine
from ..engine.model_manager import ModelManager
from ..model.tts.tts_model import Qwen3TTSModel
from ..resources import open_descriptors, os_threads, resident_memory_bytes
from ..text.frontend import text_cache_entries
from .audio_cache import AudioCache
from .voice_library import VoiceLibrary


def gpu_memory(model: Qwen3TTSModel | None) -> tuple[int, int] | None:
    """(allocated, reserved) bytes on the model's GPU; None on a CPU or with no model loaded."""
    if model is None or model.device.type != "cuda":
        return None
    return torch.cuda.memory_allocated(model.device), torch.cuda.memory_reserved(model.device)


def audio_cache_report(cache: AudioCache | None) -> dict | None:
    """The output cache's size and counters since start; None when it is off. With Redis, `entries` is None
    (counting would scan the shared keyspace) and the counters are this replica's lookups."""
    if cache is None:
        return None
    return {
        "backend": cache.backend,
        "entries": cache.entries,
        "hits": cache.hits,
        "misses": cache.misses,
        "hit_rate": cache.hit_rate,
    }


def loaded_model_id(models: ModelManager, settings: Settings) -> str | None:
    """MODEL_ID once the model has loaded; null before (as the earlier server reported it)."""
    return settings.model_id if models.loads else None


def earlier_server_keys(
    models: ModelManager,
    model_id: str | None,
    engine: Engine,
    voices: list[str],
    library: VoiceLibrary,
    audio_cache: AudioCache | None,
) -> dict:
    """The keys the earlier server's /health had, flat, with its types: what its clients' scripts read. `model_id`:
    `loaded_model_id`; `voices`, every name a request may give; the cache sizes count
    entries (an output cache on Redis: its entries are not counted, 0)."""
    keys: dict = {
        "model_loaded": models.loaded is not None,
        "model_id": model_id,
        "cuda": torch.cuda.is_available(),
        "queue_depth": engine.waiting,
        "max_queue_depth": engine.max_queue_depth,
        "voices": voices,
        "audio_cache_size": (audio_cache.entries or 0) if audio_cache is not None else 0,
        "audio_cache_max": getattr(audio_cache, "max_entries", 0) if audio_cache is not None else 0,
        "voice_cache_size": len(library.cache),
        "voice_cache_max": library.cache.max_entries,
        "voice_cache_hits": library.cache.hits,
    }
    if torch.cuda.is_available():
        keys["gpu_name"] = torch.cuda.get_device_name()
        keys["gpu_allocated_mb"] = round(torch.cuda.memory_allocated() / 2**20)
        keys["gpu_reserved_mb"] = round(torch.cuda.memory_reserved() / 2**20)
    return keys


def health_report(
    models: ModelManager, engine: Engine, library: VoiceLibrary, audio_cache: AudioCache | None, earlier: dict
) -> dict:
    """The report; `status` is "ok", or "failed" with the reason in `error` once the engine thread has stopped. The
    earlier server's flat keys (`earlier`: `earlier_server_keys`) come first, this server's after them."""
    model = models.loaded
    memory: dict[str, int | None] = {"rss_bytes": resident_memory_bytes()}
    gpu = gpu_memory(model)
    if gpu is not None:
        memory["gpu_allocated_bytes"], memory["gpu_reserved_bytes"] = gpu
    report = {
        "status": "ok" if engine.failure is None else "failed",
        **earlier,
        "pid": os.getpid(),
        "model": {
            "state": models.state.value,
            "type": model.model_type if model else None,
            "device": str(model.device) if model else None,
            "dtype": str(model.dtype).removeprefix("torch.") if model else None,
            "quantization": model.quantization_state if model else None,
            "loads": models.loads,
            "error": models.last_error,  # why the last load failed; None after a good one
        },
        # The frame step as CUDA graphs: on, off, or failed (reason) with the eager step serving; null until loaded.
        "cuda_graphs": engine.generator.graphs_state if engine.generator is not None else None,
        "memory": memory,
        "active_streams": engine.active,
        "paused_streams": engine.paused,  # waiting for their clients to take the audio they hold
        "rows_held": len(engine.generator.active) if engine.generator is not None else 0,
        "max_batch_size": engine.max_batch_size,
        "audio_cache": audio_cache_report(audio_cache),
        "voice_library": {"voices": len(library.list()), "cached_prompts": len(library.cache)},
        "text_cache_entries": text_cache_entries(),
        # What a leak would grow: the process's threads (native ones too), descriptors and the event loop's tasks.
        "process": {"threads": os_threads(), "open_fds": open_descriptors(), "asyncio_tasks": len(asyncio.all_tasks())},
    }
    if engine.failure is not None:
        report["error"] = engine.failure
    return report
