"""Model lifecycle: load on first use (once, however many callers race), warm up before ready, unload
after a stretch without work and give the memory back."""

from __future__ import annotations

import enum
import gc
import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import torch

from ..model.prompt import SpeechInput
from ..model.tts_model import Qwen3TTSModel
from ..model.voice_prompt import VoicePrompt

log = logging.getLogger(__name__)


class ModelState(str, enum.Enum):
    UNLOADED = "unloaded"
    LOADING = "loading"
    READY = "ready"
    UNLOADING = "unloading"


def warm_up_model(model: Qwen3TTSModel) -> np.ndarray:
    """A two-frame synthesis and decode through every part a request will use; returns the audio."""
    if model.model_type == "custom_voice":
        request = SpeechInput("Warm up.", speaker=model.speakers[0])
    elif model.model_type == "voice_design":
        request = SpeechInput("Warm up.", instruct="A neutral voice.")
    else:
        voice = VoicePrompt(
            id="warm-up",
            mode="x_vector",
            checkpoint=model.fingerprint,
            speaker_embedding=torch.zeros(model.config.talker.stack.hidden_size),
        )
        request = SpeechInput("Warm up.", voice=voice)
    result = model.generate([request], model.sampling(seed=0), max_frames=2)[0]
    return model.decode(result.codes)


class ModelManager:
    def __init__(
        self,
        loader: Callable[[], Qwen3TTSModel],
        idle_timeout: float = 0.0,
        warmup: Callable[[Qwen3TTSModel], object] | None = warm_up_model,
    ):
        self._loader = loader
        self._warmup = warmup
        self.idle_timeout = idle_timeout  # seconds; 0 keeps the model loaded
        self._model: Qwen3TTSModel | None = None
        self._lock = threading.Lock()
        self.state = ModelState.UNLOADED
        self.loads = 0
        self.last_error: str | None = None  # why the last load failed; None after a good one
        self.last_used = time.monotonic()

    @classmethod
    def fixed(cls, model: Qwen3TTSModel) -> ModelManager:
        """A manager around an already loaded model that is never unloaded."""
        manager = cls(lambda: model, idle_timeout=0.0, warmup=None)
        manager.get()
        return manager

    @property
    def loaded(self) -> Qwen3TTSModel | None:
        return self._model

    def get(self) -> Qwen3TTSModel:
        """The model, loading and warming it up first if needed (one load for any number of callers)."""
        model = self._model
        if model is None:
            with self._lock:
                if self._model is None:
                    self.state = ModelState.LOADING
                    started = time.monotonic()
                    try:
                        model = self._loader()
                        if self._warmup is not None:
                            self._warmup(model)
                    except BaseException as exc:
                        self.state = ModelState.UNLOADED
                        self.last_error = str(exc) or type(exc).__name__
                        raise
                    self.last_error = None
                    self._model = model
                    self.loads += 1
                    self.state = ModelState.READY
                    log.info("model ready in %.2f s", time.monotonic() - started)
                model = self._model
        self.touch()
        return model

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def idle_for(self) -> float:
        return time.monotonic() - self.last_used

    def unload_if_idle(self) -> bool:
        """Unload when idle past the timeout; the caller guarantees no work is in flight."""
        if not self.idle_timeout or self._model is None or self.idle_for() < self.idle_timeout:
            return False
        with self._lock:
            if self._model is None:
                return False
            self.state = ModelState.UNLOADING
            self._model = None
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self.state = ModelState.UNLOADED
        log.info("model unloaded after %.0f s idle", self.idle_timeout)
        return True
