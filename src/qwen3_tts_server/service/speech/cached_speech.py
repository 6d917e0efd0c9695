"""A response replayed from the output cache, with the same headers, SSE events and usage as when it was generated,
and the bytes of the answer it replays: the stored whole file as it is, or streamed in pieces as a stream sent it
(a WAV's sizes unknown, a FLAC's length 0: `streamed_file`)."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from ...audio.encoding import AudioFormat, streamed_file
from ...engine.jobs import Audience
from .stream import SpeechOutput

REPLAY_CHUNK_BYTES = 16384


@dataclass(kw_only=True)
class CachedSpeech(SpeechOutput):
    body: bytes  # the whole file
    format: AudioFormat

    async def audio(self) -> AsyncGenerator[bytes, None]:
        self.first_audio = time.perf_counter() - self.started
        streamed = streamed_file(self.format, self.body)
        for start in range(0, len(streamed), REPLAY_CHUNK_BYTES):
            yield streamed[start : start + REPLAY_CHUNK_BYTES]
        self.total_seconds = time.perf_counter() - self.started
        self.finished = True

    async def whole(self) -> bytes:
        self.first_audio = self.total_seconds = time.perf_counter() - self.started
        self.finished = True
        return self.body

    def start(self, continuation: bool = False, audience: Audience | None = None) -> None:
        """Nothing to make: the audio is stored."""

    async def aclose(self) -> None:
        """Nothing to give back: a replay holds no engine rows."""
