"""A response replayed from the output cache: the stored bytes, streamed in pieces when the client asked for
a stream, with the same headers, SSE events and usage as when it was generated."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from .speech_stream import SpeechOutput

REPLAY_CHUNK_BYTES = 16384


@dataclass(kw_only=True)
class CachedSpeech(SpeechOutput):
    body: bytes

    async def audio(self) -> AsyncGenerator[bytes, None]:
        self.first_audio = time.perf_counter() - self.started
        for start in range(0, len(self.body), REPLAY_CHUNK_BYTES):
            yield self.body[start : start + REPLAY_CHUNK_BYTES]
        self.total_seconds = time.perf_counter() - self.started
        self.finished = True

    async def aclose(self) -> None:
        """Nothing to give back: a replay holds no engine rows."""
