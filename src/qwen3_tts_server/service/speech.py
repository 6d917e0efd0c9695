"""From an API speech request to encoded audio: voice resolution, the engine job, encoding, SSE events."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np

from ..api.schemas import SpeechRequest
from ..engine.engine import Engine, JobStream
from ..engine.jobs import SpeechJob
from ..engine.model_manager import ModelManager
from ..errors import InvalidInputError, NotFoundError, TTSError, error_body
from ..model.prompt import VoiceRequest
from ..model.tts_model import Qwen3TTSModel
from ..model.voice_prompt import VoicePrompt
from .cloning import VoiceCloner
from .encoding import StreamEncoder
from .tempo import Tempo
from .voice_library import VoiceLibrary

# OpenAI's built-in voice names, each mapped to a preset speaker of the CustomVoice models.
OPENAI_VOICES = {
    "alloy": "vivian",
    "ash": "ryan",
    "ballad": "aiden",
    "coral": "serena",
    "echo": "ryan",
    "fable": "aiden",
    "onyx": "uncle_fu",
    "nova": "serena",
    "sage": "ono_anna",
    "shimmer": "sohee",
    "verse": "aiden",
    "marin": "vivian",
    "cedar": "uncle_fu",
}


def preset_voices(model: Qwen3TTSModel) -> dict[str, str]:
    """Every voice name this model answers to (presets and OpenAI aliases) -> its preset speaker."""
    voices = {name: name for name in model.speakers}
    voices.update({alias: target for alias, target in OPENAI_VOICES.items() if target in voices})
    return voices


@dataclass
class SpeechStream:
    """A prepared request: iterate `audio()` or `sse()` once."""

    chunks: JobStream  # submitted when prepared, so a full queue is answered 503 before any byte
    encoder: StreamEncoder
    text_tokens: int
    tempo: Tempo | None = None  # speed != 1
    started: float = field(default_factory=time.perf_counter)
    frames: int = 0
    first_audio: float | None = None  # seconds from prepare() to the first encoded audio
    queue_seconds: float = 0.0  # waiting for an engine row
    infer_seconds: float = 0.0  # from admission to the last frame
    encode_seconds: float = 0.0  # speed change and encoding
    total_seconds: float = 0.0  # from prepare() to the last byte

    async def audio(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.chunks:
                self.frames += chunk.frames
                self.queue_seconds = chunk.queue_seconds
                self.infer_seconds = chunk.elapsed_seconds - chunk.queue_seconds
                data = self._encode(chunk.audio)
                if self.first_audio is None:
                    self.first_audio = time.perf_counter() - self.started
                if data:
                    yield data
            tail = self._encode(None)
            self.total_seconds = time.perf_counter() - self.started
            if tail:
                yield tail
        finally:
            await self.chunks.aclose()  # a client that went away frees its engine row

    def _encode(self, audio: np.ndarray | None) -> bytes:
        """Encode one chunk of audio, or with None flush the speed change and the encoder."""
        began = time.perf_counter()
        if audio is None:
            data = (self.encoder.write(self.tempo.flush()) if self.tempo else b"") + self.encoder.close()
        else:
            data = self.encoder.write(self.tempo.process(audio) if self.tempo else audio)
        self.encode_seconds += time.perf_counter() - began
        return data

    def latency_headers(self) -> dict[str, str]:
        """The whole-file response's timing breakdown, in milliseconds."""
        parts = {
            "Queue": self.queue_seconds,
            "First-Audio": self.first_audio or 0.0,
            "Infer": self.infer_seconds,
            "Encode": self.encode_seconds,
            "Total": self.total_seconds,
        }
        return {f"X-Latency-{name}-Ms": f"{1000 * seconds:.1f}" for name, seconds in parts.items()}

    async def sse(self) -> AsyncIterator[bytes]:
        try:
            async for data in self.audio():
                yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
        except TTSError as exc:  # the headers are sent: the error becomes an event
            yield _event({"type": "error", "error": error_body(exc)})
            return
        usage = {"input_tokens": self.text_tokens, "output_tokens": self.frames}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        yield _event({"type": "speech.audio.done", "usage": usage})


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


class SpeechService:
    """What every speech route shares: the engine, the model, the voice library and the clone prompts."""

    def __init__(self, engine: Engine, models: ModelManager, library: VoiceLibrary, cloner: VoiceCloner):
        self.engine = engine
        self.models = models
        self.library = library
        self.cloner = cloner

    def prepare(self, body: SpeechRequest, clone: VoicePrompt | None = None) -> SpeechStream:
        """Validate everything up front, so that errors are answered before any audio byte is sent. `clone`
        is an inline cloned voice (the clone route); otherwise `body.voice` names the voice."""
        model = self.models.get()
        request = model.prompts.validate(self.voice_request(model, body, clone))
        text_tokens = len(model.prompts.text_ids(request.text))
        params = model.sampling_for(body)
        encoder = StreamEncoder(body.response_format, body.sample_rate)
        interactive = body.stream or body.stream_format == "sse"
        tempo = Tempo(body.speed) if body.speed != 1.0 else None
        chunks = self.engine.submit(SpeechJob(request, params, interactive=interactive))  # busy: 503 before any byte
        return SpeechStream(chunks, encoder, text_tokens=text_tokens, tempo=tempo)

    def voice_request(
        self, model: Qwen3TTSModel, body: SpeechRequest, clone: VoicePrompt | None = None
    ) -> VoiceRequest:
        language = body.language or "auto"
        if clone is not None:
            return VoiceRequest(body.input, language, instruct=body.instructions, voice=clone)
        stored = self.library.find(body.voice_name)
        if stored is not None and stored.type == "audio_sample":
            prompt = self.library.clone_prompt(stored)
            return VoiceRequest(body.input, language, instruct=body.instructions, voice=prompt)
        if stored is not None and model.model_type != "voice_design":
            raise InvalidInputError(
                f"voice {stored.id} is a designed voice (a description); a VoiceDesign model speaks it, "
                f"this server runs a {model.model_type} model",
                param="voice",
            )
        if model.model_type == "custom_voice":
            voices = preset_voices(model)
            speaker = voices.get(body.voice_name.lower())
            if speaker is None:
                raise NotFoundError(
                    f"unknown voice {body.voice_name!r}; available: {', '.join(sorted(voices))}", param="voice"
                )
            return VoiceRequest(body.input, language, speaker=speaker, instruct=body.instructions)
        if model.model_type == "voice_design":
            description = " ".join(filter(None, [stored.prompt if stored else None, body.instructions]))
            if not description.strip():
                raise InvalidInputError(
                    "a VoiceDesign model needs `instructions` describing the voice, or a voice created from a "
                    "description (POST /v1/audio/voices with type=prompt)",
                    "instructions",
                )
            return VoiceRequest(body.input, language, instruct=description)
        cloned = [voice.id for voice in self.library.list() if voice.type == "audio_sample"]
        raise NotFoundError(
            f"unknown voice {body.voice_name!r}: a Base model speaks cloned voices; upload one with "
            f"POST /v1/audio/voices or use POST /v1/audio/speech/clone"
            + (f"; library voices: {', '.join(cloned)}" if cloned else ""),
            param="voice",
        )
