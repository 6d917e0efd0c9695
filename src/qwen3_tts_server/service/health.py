"""What /health reports: the model's state and device, memory, the engine's load and state, the output cache,
the voice library."""

from __future__ import annotations

import asyncio
import os

import torch

from .. import __version__
from ..engine.recognition import RecognitionEngine
from ..engine.registry import HostedModel
from ..engine.synthesis import Engine
from ..resources import open_descriptors, os_threads, resident_memory_bytes
from ..text.frontend import text_cache_entries
from .loaded_model import LoadedModel, gpu_memory
from .speech.audio_cache import AudioCache
from .speech.voice_library import VoiceLibrary


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


def loaded_model_id(hosted: HostedModel) -> str | None:
    """The model's MODELS entry (MODEL_ID) once it has loaded; null before (as the earlier servers reported it)."""
    return hosted.source if hosted.manager.loads else None


def earlier_server_keys(
    hosted: HostedModel, voices: list[str], library: VoiceLibrary, audio_cache: AudioCache | None
) -> dict:
    """The keys the earlier servers' /health had, flat, with their types: what their clients' scripts read. They
    speak of `hosted`, the registry's primary model (the earlier ASR server's keys are the first four). `voices`,
    every name a request may give; the cache sizes count entries (an output cache on Redis: its entries are not
    counted, 0)."""
    engine = hosted.row_engine
    keys: dict = {
        "model_loaded": hosted.manager.loaded is not None,
        "model_id": loaded_model_id(hosted),
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


def health_report(hosted: HostedModel, library: VoiceLibrary, audio_cache: AudioCache | None, earlier: dict) -> dict:
    """The report of the primary model `hosted`; `status` is "ok", or "failed" with the reason in `error` once its
    engine thread has stopped. The earlier servers' flat keys (`earlier`: `earlier_server_keys`) come first, this
    server's after them."""
    models, engine = hosted.manager, hosted.row_engine
    model: LoadedModel | None = models.loaded
    generator = engine.generator if isinstance(engine, Engine) else None
    decoding = engine.rows if isinstance(engine, RecognitionEngine) else None
    graphs = (
        generator.graphs_state if generator is not None else decoding.graphs_state if decoding is not None else None
    )
    memory: dict[str, int | None] = {"rss_bytes": resident_memory_bytes()}
    gpu = gpu_memory(model)
    if gpu is not None:
        memory["gpu_allocated_bytes"], memory["gpu_reserved_bytes"] = gpu
    report = {
        "status": "ok" if engine.failure is None else "failed",
        **earlier,
        "version": __version__,
        "pid": os.getpid(),
        "model": {
            "state": models.state.value,
            "type": model.model_type if model else None,
            "device": str(model.device) if model else None,
            "dtype": str(model.dtype).removeprefix("torch.") if model else None,
            "quantization": model.quantization_state if model else None,
            "precision": hosted.precision,  # why this dtype and quantisation (QUANTIZE and DTYPE, the CPU)
            "loads": models.loads,
            "error": models.last_error,  # why the last load failed; None after a good one
        },
        # The frame step (a recogniser's token step) as CUDA graphs: on, off, or failed (reason) with the eager step
        # serving; null until loaded.
        "cuda_graphs": graphs,
        # The code predictor's fused kernels: on, off (why), or failed (why) with the layer-by-layer passes serving.
        "fused_kernels": generator.fused_state if generator is not None else None,
        # On a CPU, the code predictor's passes traced: on, off (why), or failed (why) with the layer-by-layer passes.
        "traced_predictor": generator.traced_state if generator is not None else None,
        "memory": memory,
        "active_streams": engine.active,
        "paused_streams": engine.paused,  # waiting for their clients to take the audio they hold
        "rows_held": engine.rows_held,
        "engine_thread": engine.thread_alive,  # it ends after a moment without work, and starts with the next job
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
