"""From an API speech request to prepared audio: voice, text front end, sampling, then either the output
cache's stored response or engine jobs (`SpeechStream`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, replace

from ..api.schemas import SpeechRequest
from ..audio.encoding import StreamEncoder, audio_format
from ..audio.tempo import Tempo
from ..engine.engine import Engine
from ..engine.jobs import SpeechJob
from ..engine.model_manager import ModelManager
from ..errors import InvalidInputError
from ..model.prompt import VoiceRequest
from ..model.sampling import SamplingParams
from ..model.voice_prompt import VoicePrompt
from ..text.frontend import TextSegment, text_segments
from .audio_cache import AudioCache, CachedAudio, cache_key
from .cached_speech import CachedSpeech
from .cloning import VoiceCloner
from .speech_stream import SpeechOutput, SpeechStream
from .voice_library import VoiceLibrary
from .voices import resolve_voice

log = logging.getLogger(__name__)


@dataclass
class _Plan:
    jobs: list[SpeechJob]  # one per segment
    segments: list[TextSegment]
    text_tokens: int
    cache_key: str | None  # None: not cacheable (sampled without a seed) or no cache


class SpeechService:
    """What every speech route shares: the engine, the model, the voice library, the clone prompts and the
    output cache."""

    def __init__(
        self,
        engine: Engine,
        models: ModelManager,
        library: VoiceLibrary,
        cloner: VoiceCloner,
        normalize_text: bool = True,
        audio_cache: AudioCache | None = None,
        request_timeout: float = 0.0,
    ):
        self.engine = engine
        self.models = models
        self.library = library
        self.cloner = cloner
        self.normalize_text = normalize_text  # the default for requests that do not say
        self.audio_cache = audio_cache
        self.request_timeout = request_timeout  # seconds for a whole request; 0: no limit

    async def prepare(self, body: SpeechRequest, clone: VoicePrompt | None = None) -> SpeechOutput:
        """Validate everything up front, so that errors are answered before any audio byte is sent. `clone`
        is an inline cloned voice (the clone route); otherwise `body.voice` names the voice. The text front end
        and tokenizing run in a worker thread: a 4096-character input must not hold up other streams."""
        started = time.perf_counter()
        plan = await asyncio.to_thread(self._plan, body, clone)
        fmt, rate = audio_format(body.response_format, body.sample_rate)
        output = dict(segments=plan.segments, media_type=fmt.media_type, sample_rate=rate, started=started)
        if plan.cache_key is not None:
            entry = await self.audio_cache.get(plan.cache_key)
            if entry is not None:
                cut = entry.headers.get("X-Segments-Cut")
                return CachedSpeech(
                    **output,
                    body=entry.audio,
                    text_tokens=entry.text_tokens,
                    frames=entry.frames,
                    cut_segments=[int(index) for index in cut.split(",")] if cut else [],
                    cache="hit",
                )
        timeout = self.request_timeout
        stream = SpeechStream(
            **output,
            text_tokens=plan.text_tokens,
            engine=self.engine,
            jobs=plan.jobs,
            encoder=StreamEncoder(body.response_format, body.sample_rate),
            tempo=Tempo(body.speed) if body.speed != 1.0 else None,
            deadline=time.monotonic() + timeout if timeout else None,
            cache="off" if plan.cache_key is None else "miss",
        )
        if plan.cache_key is not None:
            stream.on_complete = lambda audio: self._store(plan.cache_key, stream, audio)
        return stream

    async def _store(self, key: str, stream: SpeechStream, audio: bytes) -> None:
        headers = {"X-Segments-Cut": ",".join(map(str, stream.cut_segments))} if stream.cut_segments else {}
        entry = CachedAudio(audio, stream.media_type, stream.frames, stream.text_tokens, headers)
        await self.audio_cache.put(key, entry)

    def _plan(self, body: SpeechRequest, clone: VoicePrompt | None) -> _Plan:
        model = self.models.get()
        voice = resolve_voice(model, body, self.library, clone)
        model.prompts.validate(voice)  # the voice and the language as given, before the text is cut up
        normalize_text = self.normalize_text if body.normalize is None else body.normalize
        segments = text_segments(body.input, body.language, normalize_text)
        if not segments:
            raise InvalidInputError("input is empty", param="input")
        log.debug("spoken as %s", [(segment.language, segment.text) for segment in segments])
        requests = [model.prompts.validate(replace(voice, text=s.text, language=s.language)) for s in segments]
        params = model.sampling_for(body)
        interactive = body.stream or body.stream_format == "sse"
        # Each segment its own seed, derived from the request's: reproducible, yet not the same noise each time.
        seeds = [None if params.seed is None else params.seed + index for index in range(len(requests))]
        jobs = [
            SpeechJob(request, replace(params, seed=seed), interactive=interactive)
            for request, seed in zip(requests, seeds, strict=True)
        ]
        text_tokens = sum(len(model.prompts.text_ids(request.text)) for request in requests)
        key = self._cache_key(model.fingerprint, body, voice, segments, params) if self.audio_cache else None
        return _Plan(jobs, segments, text_tokens, key)

    @staticmethod
    def _cache_key(
        checkpoint: str, body: SpeechRequest, voice: VoiceRequest, segments: list[TextSegment], params: SamplingParams
    ) -> str | None:
        """Everything that changes the response's bytes; None when sampling without a seed (no two alike)."""
        if params.seed is None and (params.do_sample or params.subtalker_do_sample):
            return None
        return cache_key(
            {
                "checkpoint": checkpoint,
                "segments": [[segment.language, segment.text] for segment in segments],
                "speaker": voice.speaker,
                "instruct": voice.instruct,
                "voice": voice.voice.id if voice.voice is not None else None,
                "format": body.response_format,
                "sample_rate": body.sample_rate,
                "speed": body.speed,
                "sampling": dataclasses.asdict(params),
            }
        )
