"""Voice activity on a live 16 kHz stream: Silero VAD (the `silero-vad` package, its model in the wheel) on frames of
512 samples, the only size it takes at that rate, whatever sizes the audio arrives in. Its own iterator turns the
frames' speech probabilities into speech start and end: speech starts on a frame at or above `threshold` (the
start moved `prefix_padding_ms` earlier, so the utterance keeps the breath before its first word), and ends once
the probability has stayed below `threshold - 0.15` for `silence_duration_ms` (the end `prefix_padding_ms` after the
silence began). Silence and steady noise raise neither."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

SAMPLE_RATE = 16000
FRAME = 512  # samples: 32 ms


@dataclass(frozen=True)
class VoiceActivitySettings:
    threshold: float = 0.5  # speech probability that starts speech
    prefix_padding_ms: int = 300  # audio kept before speech starts
    silence_duration_ms: int = 500  # silence that ends speech


@dataclass(frozen=True)
class SpeechEvent:
    kind: Literal["started", "stopped"]
    sample: int  # where in the stream, in 16 kHz samples from its start
    found: int  # where the detector was when it found it (a stop's padding may reach past it)
    quiet_from: int  # a stop's: where the silence that ended the speech began (a start's: `sample`)


@functools.cache
def _silero_model() -> torch.jit.ScriptModule:
    from silero_vad import load_silero_vad  # imported on first use: its model is loaded once per process

    return load_silero_vad()


class VoiceActivity:
    """One stream's detector: `feed` samples (float, 16 kHz mono) as they arrive, get the events they complete."""

    def __init__(self, settings: VoiceActivitySettings | None = None):
        from silero_vad import VADIterator

        self.settings = settings or VoiceActivitySettings()
        model = copy.deepcopy(_silero_model())  # a stream's own recurrent state
        self._iterator = VADIterator(
            model,
            threshold=self.settings.threshold,
            sampling_rate=SAMPLE_RATE,
            min_silence_duration_ms=self.settings.silence_duration_ms,
            speech_pad_ms=self.settings.prefix_padding_ms,
        )
        self._pending = np.zeros(0, np.float32)

    @property
    def speaking(self) -> bool:
        """Within speech: started, not yet stopped."""
        return bool(self._iterator.triggered)

    @torch.inference_mode()
    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        self._pending = np.concatenate([self._pending, np.asarray(samples, np.float32).reshape(-1)])
        events = []
        whole = len(self._pending) // FRAME * FRAME
        for start in range(0, whole, FRAME):
            found = self._iterator(torch.from_numpy(self._pending[start : start + FRAME]))
            where = self._iterator.current_sample
            if found and "start" in found:
                events.append(SpeechEvent("started", int(found["start"]), where, int(found["start"])))
            elif found and "end" in found:
                end = int(found["end"])
                events.append(SpeechEvent("stopped", end, where, end - self._iterator.speech_pad_samples))
        self._pending = self._pending[whole:]
        return events
