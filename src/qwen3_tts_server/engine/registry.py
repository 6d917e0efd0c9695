"""The hosted models: each checkpoint a server hosts with its own lifecycle (`ModelManager`) and engine, and the
memory budget they share. Loading a model that would not fit unloads the least recently used idle model first;
with none idle the load waits for one, up to its wait, then fails with ModelWaitError (503, Retry-After). The
speech tokenizer that checkpoints share byte for byte is loaded once (`model.tts.shared_parts`) and counted once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import model_id_of
from ..errors import ConfigurationError, ModelWaitError, NotFoundError
from ..model.asr.loading import AsrDescription, asr_fingerprint
from ..model.checkpoint import checkpoint_fingerprint, weight_files
from ..model.footprint import file_digest, weight_bytes
from ..model.tts.config import TTSConfig
from .model_manager import ModelManager, ModelState
from .recognition import RecognitionEngine
from .rows import RowEngine
from .synthesis import MAX_RETRY_AFTER, Engine

log = logging.getLogger(__name__)
NO_SPEECH_MODEL = (
    "no speech model is hosted: add a Qwen3-TTS checkpoint (Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice) to MODELS"
)
RELEASE_SECONDS = 10.0  # the longest an idle model's engine is given to unload it


@dataclass(frozen=True)
class Footprint:
    """What a model takes once loaded: its own weights, and the speech tokenizer parts (decoder; encoder for Base
    models) it shares with every model whose speech tokenizer file has the same bytes."""

    own: int
    codec_digest: str
    codec_parts: dict[str, int]  # part -> bytes

    def shared_parts(self) -> set[tuple[str, str]]:
        return {(self.codec_digest, part) for part in self.codec_parts}

    def cost(self, loaded: Collection[tuple[str, str]] = ()) -> int:
        """Bytes this model adds beside models holding the `loaded` parts."""
        return self.own + sum(
            size for part, size in self.codec_parts.items() if (self.codec_digest, part) not in loaded
        )


def checkpoint_footprint(directory: Path, config: TTSConfig, dtype: torch.dtype) -> Footprint:
    codec_file = directory / "speech_tokenizer" / "model.safetensors"
    parts = ("decoder", "encoder") if config.model_type == "base" else ("decoder",)
    sizes = {part: weight_bytes(codec_file, dtype, (f"{part}.",)) for part in parts}
    return Footprint(weight_bytes(directory / "model.safetensors", dtype), file_digest(codec_file), sizes)


@dataclass(frozen=True)
class HostedAligner:
    """The ForcedAligner checkpoint loaded with each transcriber: its id (hub id or directory name) and files."""

    id: str
    directory: Path


@dataclass(eq=False)
class HostedModel:
    """One hosted checkpoint: `id` is its hub id or directory name; `directory`, `fingerprint` and `footprint` are
    read at start (`ModelRegistry.prepare`)."""

    id: str
    source: str
    manager: ModelManager
    directory: Path | None = None
    dtype: torch.dtype = torch.float32
    attached: RowEngine | None = field(default=None, repr=False)  # its Engine or RecognitionEngine, from the app
    kind: str = "tts"  # "tts", or a recogniser's "asr" (`ModelRegistry.recognizers`)
    aligner: HostedAligner | None = None  # a recogniser's, loaded with it for word timestamps
    precision: str | None = None  # why it loads in its dtype and quantisation (`ModelSettings.precision`)
    fingerprint: str | None = None
    footprint: Footprint | None = None

    @property
    def config(self) -> TTSConfig | None:
        """A speech model's config once read (at start, `ModelRegistry.prepare`); None if it cannot be."""
        return self.manager.known_config() if self.kind == "tts" else None

    @property
    def description(self) -> AsrDescription | None:
        """A recogniser's kind and languages once read (at start); None if they cannot be."""
        return self.manager.known_config() if self.kind != "tts" else None

    @property
    def row_engine(self) -> RowEngine:
        """Its engine, of either family."""
        if self.attached is None:
            raise RuntimeError(f"no engine attached to {self.id}")
        return self.attached

    @property
    def engine(self) -> Engine:
        """A speech model's engine."""
        if not isinstance(self.attached, Engine):
            raise RuntimeError(f"no speech engine attached to {self.id}")
        return self.attached

    @property
    def recognition_engine(self) -> RecognitionEngine:
        """A recogniser's engine."""
        if not isinstance(self.attached, RecognitionEngine):
            raise RuntimeError(f"no recognition engine attached to {self.id}")
        return self.attached

    @property
    def loaded(self) -> bool:
        return self.manager.loaded is not None or self.manager.state is ModelState.LOADING


class ModelRegistry:
    """The hosted speech models (iterating the registry gives them: the first is the default), and beside them the
    hosted recognisers (`recognizers`); the memory budget, preloading and lifecycles take both. A server may host
    either family alone."""

    def __init__(
        self,
        hosted: list[HostedModel],
        budget: int | None = None,
        wait_seconds: float = 60.0,
        recognizers: list[HostedModel] | None = None,
        speech_aligner: ModelManager | None = None,
    ):
        if not hosted and not recognizers:
            raise ConfigurationError("no model to host: MODELS is empty")
        self.hosted = hosted
        self.recognizers = recognizers or []
        # What times the words of synthesised speech: a transcriber's manager (its aligner loaded with it) or a
        # ForcedAligner's own, loaded on the first request for timestamps; None: no ForcedAligner is hosted.
        self.speech_aligner = speech_aligner
        self.budget = budget  # bytes every loaded model may take together; None: no limit
        self.wait_seconds = wait_seconds  # how long a load waits for room before failing
        self._lock = threading.Lock()  # one budget decision at a time
        # Models whose load waits for room: they hold none of the budget until given it (two loads asking at once
        # would otherwise each wait for the other).
        self._waiting_for_room: set[str] = set()

    @classmethod
    def single(cls, source: str, manager: ModelManager) -> ModelRegistry:
        return cls([HostedModel(model_id_of(source), source, manager)])

    def __iter__(self) -> Iterator[HostedModel]:
        return iter(self.hosted)

    def __len__(self) -> int:
        return len(self.hosted)

    @property
    def default(self) -> HostedModel:
        """The first hosted speech model: what a speech request that names no model is spoken by. A server of
        recognisers alone answers speech requests with a 404 naming `model`."""
        if not self.hosted:
            raise NotFoundError(NO_SPEECH_MODEL, param="model")
        return self.hosted[0]

    @property
    def primary(self) -> HostedModel:
        """The first hosted model, a speech model before any recogniser: what the earlier servers' one-model keys
        (`model_loaded`, `model_id`) speak of."""
        return self.every[0]

    def get(self, model_id: str) -> HostedModel | None:
        """The speech model of this id."""
        return next((hosted for hosted in self.hosted if hosted.id == model_id), None)

    def _any(self, model_id: str) -> HostedModel | None:
        return self.get(model_id) or self.recognizer(model_id)

    @property
    def every(self) -> list[HostedModel]:
        """The speech models, then the recognisers."""
        return self.hosted + self.recognizers

    def recognizer(self, model_id: str) -> HostedModel | None:
        return next((hosted for hosted in self.recognizers if hosted.id == model_id), None)

    def attach_engines(
        self,
        build: Callable[[ModelManager], Engine],
        recognition: Callable[[ModelManager], RecognitionEngine] | None = None,
    ) -> None:
        """Each speech model's engine from `build`, each recogniser's from `recognition`."""
        for hosted in self.hosted:
            hosted.attached = build(hosted.manager)
        for hosted in self.recognizers:
            if recognition is None:
                raise ConfigurationError(f"no engine for the recognition model {hosted.id}")
            hosted.attached = recognition(hosted.manager)

    def engines(self) -> list[RowEngine]:
        return [hosted.attached for hosted in self.every if hosted.attached is not None]

    def start(self, preload_all: bool = False, preload: Collection[str] = ()) -> None:
        """Start every engine; those of the models to preload (all, or the ids `preload` names) after loading."""
        unknown = [model_id for model_id in preload if self._any(model_id) is None]
        if unknown:
            hosted = ", ".join(hosted.id for hosted in self.every)
            raise ConfigurationError(f"PRELOAD_MODELS names {', '.join(unknown)}, not hosted (hosted: {hosted})")
        preloaded = [hosted for hosted in self.every if hosted.id in preload]
        self.check_preload(preloaded)
        if preload_all:
            preloaded = self._fitting(self.every)
        for hosted in self.every:
            hosted.row_engine.start(hosted in preloaded)

    def stop(self) -> None:
        for engine in self.engines():
            engine.stop()

    @property
    def failure(self) -> str | None:
        """Why an engine thread stopped, if one did (its model's requests are refused)."""
        return next((engine.failure for engine in self.engines() if engine.failure is not None), None)

    def prepare(self) -> None:
        """Read every config and footprint (not the weights). Blocking."""
        for hosted in self.hosted:
            hosted.manager.prepare()
            if hosted.config is None and len(self.every) > 1:  # one model alone starts and says why on /ready
                raise ConfigurationError(f"MODELS: {hosted.source} cannot be hosted: {hosted.manager.last_error}")
            if hosted.directory is not None and hosted.config is not None:
                hosted.fingerprint = checkpoint_fingerprint(hosted.directory)
                hosted.footprint = checkpoint_footprint(hosted.directory, hosted.config, hosted.dtype)
        for hosted in self.recognizers:
            hosted.manager.prepare()
            if hosted.description is None:
                raise ConfigurationError(f"MODELS: {hosted.source} cannot be hosted: {hosted.manager.last_error}")
            if hosted.directory is not None:
                files = weight_files(hosted.directory)
                hosted.fingerprint = asr_fingerprint(hosted.directory, files)
                if hosted.aligner is not None:  # its weights count with the transcriber's
                    files += weight_files(hosted.aligner.directory)
                hosted.footprint = Footprint(sum(weight_bytes(file, hosted.dtype) for file in files), "", {})
        self._check_budget()

    def _check_budget(self) -> None:
        sized = [hosted for hosted in self.every if hosted.footprint is not None]
        if self.budget is None or not sized:
            return
        smallest = min(sized, key=lambda hosted: hosted.footprint.cost())
        if smallest.footprint.cost() > self.budget:
            raise ConfigurationError(
                f"MODEL_MEMORY_BUDGET={self.budget} bytes holds no model: the smallest, {smallest.id}, takes "
                f"{smallest.footprint.cost() / 2**20:.0f} MiB"
            )

    def _fitting(self, models: list[HostedModel]) -> list[HostedModel]:
        """The first of `models` that the budget holds together (all of them without a budget)."""
        fitting: list[HostedModel] = []
        for hosted in models:
            if self.budget is None or hosted.footprint is None or self._usage([*fitting, hosted])[0] <= self.budget:
                fitting.append(hosted)
            else:
                log.info(
                    "PRELOAD_MODEL: %s not preloaded, past MODEL_MEMORY_BUDGET; it loads when asked for", hosted.id
                )
        return fitting

    def check_preload(self, preloaded: list[HostedModel]) -> None:
        """Refuse a PRELOAD_MODEL list that the budget cannot hold at once."""
        if self.budget is None or any(hosted.footprint is None for hosted in preloaded):
            return
        total, _ = self._usage(preloaded)
        if total > self.budget:
            names = ", ".join(hosted.id for hosted in preloaded)
            raise ConfigurationError(
                f"PRELOAD_MODEL asks for {names}: {total / 2**20:.0f} MiB, over MODEL_MEMORY_BUDGET "
                f"({self.budget / 2**20:.0f} MiB)"
            )

    def speakers(self) -> list[str]:
        """The preset speakers of every hosted model whose config has been read, each once, in MODELS' order."""
        found: list[str] = []
        for hosted in self.hosted:
            if hosted.config is not None:
                found += [name for name in hosted.config.speakers if name not in found]
        return found

    def others_loaded(self, model_id: str) -> bool:
        """Whether a model other than `model_id` is loaded (or loading): `model_id` then loads on a small share
        of the CPU (`ModelManager`)."""
        return any(other.loaded for other in self.every if other.id != model_id)

    def make_room(self, model_id: str) -> None:
        """Before model `model_id` loads: unload least recently used idle models until it fits the budget; wait for
        one to become idle, up to `wait_seconds`, when none is. Loads that wait here take none of the budget, so two
        asking at once do not wait for each other. Called on the loading thread."""
        hosted = self._any(model_id)
        if self.budget is None or hosted is None or hosted.footprint is None:
            return
        deadline = time.monotonic() + self.wait_seconds
        with self._lock:
            self._waiting_for_room.add(hosted.id)
        try:
            while True:
                with self._lock:
                    others = [
                        other
                        for other in self.every
                        if other is not hosted and other.loaded and other.id not in self._waiting_for_room
                    ]
                    used, loaded = self._usage(others)
                    if used + hosted.footprint.cost(loaded) <= self.budget:
                        self._waiting_for_room.discard(hosted.id)  # given room: it counts from this decision on
                        return
                    idle = [o for o in others if o.manager.loaded is not None and o.attached and o.attached.idle]
                for victim in sorted(idle, key=lambda other: other.manager.last_used):
                    if victim.row_engine.release(RELEASE_SECONDS):
                        log.info("unloaded %s to make room for %s (MODEL_MEMORY_BUDGET)", victim.id, hosted.id)
                        break
                else:
                    if time.monotonic() >= deadline:
                        busy = [other.attached for other in others if other.attached is not None]
                        retry = min((engine.retry_after() for engine in busy), default=MAX_RETRY_AFTER)
                        raise ModelWaitError(
                            f"model {hosted.id} does not fit MODEL_MEMORY_BUDGET beside "
                            f"{', '.join(other.id for other in others)}, all busy; retry shortly",
                            retry,
                        )
                    time.sleep(0.05)
        finally:
            with self._lock:
                self._waiting_for_room.discard(hosted.id)

    @staticmethod
    def _usage(models: list[HostedModel]) -> tuple[int, set[tuple[str, str]]]:
        """The bytes `models` take together, each shared part once, and the shared parts they hold."""
        used, loaded = 0, set()
        for other in models:
            if other.footprint is not None:
                used += other.footprint.cost(loaded)
                loaded |= other.footprint.shared_parts()
        return used, loaded

    def shared(self) -> list[dict]:
        """The speech tokenizers that several hosted models share (the same file bytes), loaded once."""
        groups: dict[str, list[HostedModel]] = {}
        for hosted in self.hosted:
            if hosted.footprint is not None:
                groups.setdefault(hosted.footprint.codec_digest, []).append(hosted)
        return [
            {
                "part": "speech_tokenizer",
                "sha256": digest,
                "models": [hosted.id for hosted in group],
                "loaded_by": [hosted.id for hosted in group if hosted.manager.loaded is not None],
            }
            for digest, group in groups.items()
            if len(group) > 1
        ]
