"""What the model layer gives for a live utterance run alone, pass by pass: what the engine, the sessions and the
protocols are checked against."""

from __future__ import annotations

import numpy as np

from qwen3_tts_server.model.asr.streaming import IncrementalPasses, LiveUtterance, StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber

CHUNK = 32000  # samples: the algorithm's 2 s chunks at 16 kHz


def pass_by_pass(
    transcriber: Transcriber,
    wave: np.ndarray,
    settings: StreamingSettings | None = None,
    language: str | None = None,
    field: str = "text",
) -> list[str]:
    """The utterance's `field` ("text" or "output") after each pass over `wave` fed in 2 s chunks, the tail's last."""
    utterance = LiveUtterance(
        transcriber, IncrementalPasses(transcriber, "", language), settings or StreamingSettings()
    )
    seen = []
    for start in range(0, len(wave), CHUNK):
        if utterance.feed(wave[start : start + CHUNK]):
            seen.append(getattr(utterance, field))
    utterance.finish()
    return [*seen, getattr(utterance, field)]
