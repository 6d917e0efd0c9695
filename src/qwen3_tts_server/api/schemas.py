"""Request bodies of the OpenAI-compatible API (unknown extra fields are accepted: clients send
extensions through `extra_body`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw"]


class VoiceId(BaseModel):
    id: str


class SpeechRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = "tts-1"
    input: str = Field(max_length=4096)
    voice: str | VoiceId
    instructions: str | None = Field(default=None, max_length=4096)
    response_format: ResponseFormat = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    # Extensions.
    stream: bool = True  # false: the whole file at once, with Content-Length and latency headers
    language: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    sample_rate: int | None = None

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceId) else self.voice
