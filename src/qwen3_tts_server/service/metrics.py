"""Prometheus metrics, one registry per app. Counters and histograms are observed as requests finish and as
the engine steps; gauges (queue, streams, model state, memory, caches) are read from their owners at scrape
time. Labels stay bounded: routes are route templates, formats and error types come from fixed sets, `model` is
a hosted model's id (empty for requests that speak nothing); no label ever carries text or a voice id."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..engine.model_manager import ModelState
from ..engine.registry import ModelRegistry
from .loaded_model import gpu_memory

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)
RTF_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 5, 10)


@dataclass
class CacheCounts:
    """What the metrics read from a cache: its running counters."""

    hits: int
    misses: int
    evictions: int


@dataclass
class RequestOutcome:
    """One finished HTTP request, as the metrics see it (seconds; None where it does not apply)."""

    route: str
    status: int
    format: str = ""
    model: str = ""  # the hosted model that spoke it
    first_audio: float | None = None
    total: float | None = None  # None: the client went away before the end
    queue: float = 0.0
    encode: float = 0.0
    audio_seconds: float = 0.0
    generated: bool = False  # by the engine (not a replay from the output cache, not a non-speech route)
    error_type: str | None = None


class Metrics:
    def __init__(
        self,
        models: ModelRegistry,
        caches: Mapping[str, Callable[[], CacheCounts | None]],
        live_sessions: Callable[[], Mapping[str, int]] = dict,
    ):
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.registry.register(_LiveState(models, caches, live_sessions))
        r = self.registry
        self.requests = Counter(
            "qwen3_tts_requests",
            "HTTP requests by route, format, status and model",
            ["route", "format", "status", "model"],
            registry=r,
        )
        self.websocket_sessions = Counter("qwen3_tts_websocket_sessions", "WebSocket sessions closed", registry=r)
        self.errors = Counter("qwen3_tts_errors", "Failed requests by error type", ["type"], registry=r)
        self.audio_seconds = Counter("qwen3_tts_audio_seconds", "Seconds of audio delivered", registry=r)
        self.first_audio = Histogram(
            "qwen3_tts_time_to_first_audio_seconds",
            "From the request to its first audio bytes",
            ["route", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "qwen3_tts_request_duration_seconds",
            "From the request to its last byte",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "qwen3_tts_queue_wait_seconds", "Wait for an engine row", buckets=LATENCY_BUCKETS, registry=r
        )
        self.engine_step = Histogram(
            "qwen3_tts_engine_step_seconds",
            "One step of every active row: a frame of speech, or a token of text for a recogniser",
            ["model"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.codec_decode = Histogram(
            "qwen3_tts_codec_decode_seconds",
            "Incremental codec decode per step",
            ["model"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.encode = Histogram(
            "qwen3_tts_encode_seconds", "Speed change and encoding per request", ["format"], buckets=STEP_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.real_time_factor = Histogram(
            "qwen3_tts_real_time_factor",
            "Generation time over audio duration per request (below 1: faster than real time)",
            buckets=RTF_BUCKETS,
            registry=r,
        )
        for hosted in models.every:  # the recognisers' steps too: a token of text for every active row
            hosted.row_engine.add_step_listener(partial(self.observe_step, hosted.id))

    def observe_step(self, model: str, step_seconds: float, decode_seconds: float | None) -> None:
        """Called from model `model`'s engine thread after each step (decode: None when no chunk was due)."""
        self.engine_step.labels(model).observe(step_seconds)
        if decode_seconds is not None:
            self.codec_decode.labels(model).observe(decode_seconds)

    def observe_request(self, outcome: RequestOutcome) -> None:
        self.requests.labels(outcome.route, outcome.format, str(outcome.status), outcome.model).inc()
        if outcome.error_type is not None:
            self.errors.labels(outcome.error_type).inc()
        if outcome.first_audio is not None:
            self.first_audio.labels(outcome.route, outcome.model).observe(outcome.first_audio)
        if outcome.total is not None:
            self.duration.labels(outcome.route).observe(outcome.total)
        if outcome.audio_seconds > 0:
            self.audio_seconds.inc(outcome.audio_seconds)
        if outcome.generated:
            self.queue_wait.observe(outcome.queue)
            self.encode.labels(outcome.format).observe(outcome.encode)
            if outcome.total is not None and outcome.audio_seconds > 0:
                self.real_time_factor.observe(outcome.total / outcome.audio_seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _LiveState(Collector):
    """Gauges read at scrape time, by hosted model (`live_sessions`: each transcriber's open live sessions), and the
    caches' counters."""

    def __init__(
        self,
        models: ModelRegistry,
        caches: Mapping[str, Callable[[], CacheCounts | None]],
        live_sessions: Callable[[], Mapping[str, int]],
    ):
        self._models = models
        self._caches = caches
        self._live_sessions = live_sessions

    def collect(self) -> Iterator:
        gauges = {
            "queue_depth": "Requests waiting for an engine row",
            "active_streams": "Requests whose engine rows step (paused ones not counted)",
            "paused_streams": "Requests whose engine rows wait for their client to take the audio they hold "
            "(backpressure)",
            "batch_occupancy": "Active rows over the batch size",
        }
        families = {
            name: GaugeMetricFamily(f"qwen3_tts_{name}", text, labels=["model"]) for name, text in gauges.items()
        }
        state = GaugeMetricFamily("qwen3_tts_model_state", "1 for the model's current state", labels=["model", "state"])
        for hosted in self._models.every:
            engine = hosted.row_engine
            values = {
                "queue_depth": engine.waiting,
                "active_streams": engine.active,
                "paused_streams": engine.paused,
                "batch_occupancy": engine.active / engine.max_batch_size,
            }
            for name, family in families.items():
                family.add_metric([hosted.id], values[name])
            for candidate in ModelState:
                state.add_metric([hosted.id, candidate.value], float(hosted.manager.state is candidate))
        yield from families.values()
        yield state
        live = GaugeMetricFamily(
            "qwen3_tts_live_sessions",
            "Live recognition sessions open (LIVE_MAX_SESSIONS bounds them)",
            labels=["model"],
        )
        for model, count in self._live_sessions().items():
            live.add_metric([model], count)
        yield live
        loaded = next((model for model in (hosted.manager.loaded for hosted in self._models.every) if model), None)
        memory = gpu_memory(loaded)
        if memory is not None:
            allocated, reserved = memory
            yield GaugeMetricFamily("qwen3_tts_gpu_memory_allocated_bytes", "GPU memory in tensors", value=allocated)
            yield GaugeMetricFamily("qwen3_tts_gpu_memory_reserved_bytes", "GPU memory held by torch", value=reserved)
        families = {
            name: CounterMetricFamily(f"qwen3_tts_cache_{name}", f"Cache {name} by cache", labels=["cache"])
            for name in ("hits", "misses", "evictions")
        }
        for cache, read in self._caches.items():
            counts = read()
            if counts is not None:
                for name, family in families.items():
                    family.add_metric([cache], getattr(counts, name))
        yield from families.values()
