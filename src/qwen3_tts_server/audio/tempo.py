"""Pitch-preserving speed change (OpenAI's `speed`, 0.25-4), streamed: FFmpeg's atempo through PyAV."""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def atempo_factors(speed: float) -> list[float]:
    """atempo takes 0.5-2.0 per instance; wider speeds are a chain of them."""
    factors = []
    while speed > 2.0:
        factors.append(2.0)
        speed /= 2.0
    while speed < 0.5:
        factors.append(0.5)
        speed /= 0.5
    return [*factors, speed]


class Tempo:
    """Feed float32 mono chunks at `sample_rate` to `process`; call `flush` once at the end."""

    def __init__(self, speed: float, sample_rate: int):
        import av  # PyAV (FFmpeg), imported on first use

        self._av = av
        self.rate = sample_rate
        self._graph = av.filter.Graph()
        self._source = self._graph.add_abuffer(
            format="flt", sample_rate=sample_rate, layout="mono", time_base=Fraction(1, sample_rate)
        )
        previous = self._source
        for factor in atempo_factors(speed):
            stage = self._graph.add("atempo", f"{factor:.6f}")
            previous.link_to(stage)
            previous = stage
        self._sink = self._graph.add("abuffersink")
        previous.link_to(self._sink)
        self._graph.configure()
        self._pts = 0

    def process(self, audio: np.ndarray) -> np.ndarray:
        samples = np.ascontiguousarray(audio, dtype=np.float32)
        if len(samples):
            frame = self._av.AudioFrame.from_ndarray(samples[None], format="flt", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = self.rate, self._pts, Fraction(1, self.rate)
            self._pts += len(samples)
            self._source.push(frame)
        return self._pull()

    def flush(self) -> np.ndarray:
        self._source.push(None)
        return self._pull()

    def _pull(self) -> np.ndarray:
        out = []
        while True:
            try:
                frame = self._sink.pull()
            except (self._av.error.BlockingIOError, self._av.error.EOFError):
                break
            out.append(frame.to_ndarray().reshape(-1))
        return np.concatenate(out) if out else np.zeros(0, np.float32)
