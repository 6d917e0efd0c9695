"""From a synthesis request to prepared audio: the request is prepared once (voice, text front end, token ids,
sampling, output format), then answered from the output cache or by engine jobs (`SpeechStream`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass

from ...audio.encoding import AudioFormat, StreamEncoder, audio_format
from ...audio.tempo import Tempo
from ...engine.jobs import DEFAULT_CHUNK_SCHEDULE, WHOLE_SEGMENT, SpeechJob
from ...engine.registry import HostedModel, ModelRegistry
from ...errors import InvalidInputError
from ...model.tts.prompt import VoiceSpec
from ...model.tts.sampling import SamplingParams
from ...model.tts.tts_model import Qwen3TTSModel
from ...model.tts.voice_prompt import VoicePrompt
from .alignment import NO_ALIGNER, SegmentTiming, SpeechAligner
from .audio_cache import AudioCache, CachedAudio, cache_key
from .cached_speech import CachedSpeech
from .preparation import PreparedText, prepare_text
from .requests import SynthesisRequest
from .routing import route
from .stream import SpeechOutput, SpeechStream
from .voice_library import VoiceLibrary
from .voices import VoiceService, resolve_voice

log = logging.getLogger(__name__)
# Raised when what an entry holds changes, so that shared (Redis) entries of the old kind are never replayed.
# 2: whole files with their exact WAV sizes and FLAC length.
CACHE_ENTRY_VERSION = 2


@dataclass(frozen=True)
class _Checked:
    """A request's voice, sampling and output format, checked against the model."""

    model: Qwen3TTSModel
    voice: VoiceSpec
    params: SamplingParams
    format: AudioFormat
    sample_rate: int  # of the output


@dataclass(frozen=True)
class _Prepared:
    checked: _Checked
    text: PreparedText
    cache_key: str | None  # None: not cacheable (sampled without a seed) or no cache


class SpeechService:
    """What every speech entry point shares: the hosted models and their engines, voices and the output cache."""

    def __init__(
        self,
        registry: ModelRegistry,
        voices: VoiceService,
        normalize_text: bool = True,
        audio_cache: AudioCache | None = None,
        request_timeout: float = 0.0,
        cache_sampled: bool = True,
        stream_type: str = "token",
        token_chunks: tuple[int, ...] | None = None,
        aligner: SpeechAligner | None = None,
    ):
        self.registry = registry
        self.voices = voices
        self.normalize_text = normalize_text  # the default for requests that do not say
        self.audio_cache = audio_cache
        self.request_timeout = request_timeout  # seconds for a whole request; 0: no limit
        # Sampled requests without a seed cached too (the earlier server's behaviour): a repeat replays the first.
        self.cache_sampled = cache_sampled
        self.stream_type = stream_type  # STREAM_TYPE: how a request without a stream_mode is cut into chunks
        self.token_chunks = token_chunks or DEFAULT_CHUNK_SCHEDULE  # chunk sizes in frames of the token mode
        self.aligner = aligner  # the hosted ForcedAligner's, for word timestamps; None: none is hosted

    async def timing(self, speed: float = 1.0) -> SegmentTiming:
        """The word timing of one output (a request's, or a WebSocket utterance's), its aligner loaded; a clear
        error before any audio where none is hosted."""
        if self.aligner is None:
            raise InvalidInputError(NO_ALIGNER, param="timestamps")
        await self.aligner.aligner()
        return SegmentTiming(self.aligner, speed)

    def chunk_schedule(self, request: SynthesisRequest) -> tuple[int, ...]:
        """The frames of each audio chunk of the request's segments (the last size repeats)."""
        return WHOLE_SEGMENT if (request.stream_mode or self.stream_type) == "sentence" else self.token_chunks

    @property
    def library(self) -> VoiceLibrary:
        return self.voices.library

    async def route(self, request: SynthesisRequest, inline_clone: bool = False) -> HostedModel:
        """The hosted model that serves `request` (`routing.route`)."""
        if len(self.registry) <= 1:
            return self.registry.default  # none: its 404
        voice = request.voice or self.voices.default_voice
        return await asyncio.to_thread(
            route, self.registry, self.library, request.model, voice, request.instructions, inline_clone
        )

    async def speak(
        self,
        request: SynthesisRequest,
        clone: VoicePrompt | None = None,
        start: bool = True,
        hosted: HostedModel | None = None,
        timing: SegmentTiming | None = None,
    ) -> SpeechOutput:
        """The request's audio, with every error answered before any audio byte is sent. `clone` is an inline
        cloned voice; otherwise `request.voice` names the voice. `hosted` is the model that serves it (routed
        from the request when None). Preparing runs in a worker thread: a 4096-character input must not hold up
        other streams. With `start` False the caller starts its engine job (`SpeechOutput.start`) when it wants
        the audio made. With `request.timestamps`, each segment's words are timed (`timing`: shared with the other
        outputs of one WebSocket utterance; by default the request's own), and the output cache is not read."""
        started = time.perf_counter()
        if request.timestamps and timing is None:
            timing = await self.timing(request.speed)
        hosted = hosted or await self.route(request, inline_clone=clone is not None)
        model = await hosted.manager.get_async()
        prepared = await asyncio.to_thread(self._prepare, model, request, clone)
        text, checked = prepared.text, prepared.checked
        model = checked.model
        output = dict(
            segments=text.segments,
            media_type=checked.format.media_type,
            sample_rate=checked.sample_rate,
            frame_seconds=model.frames_to_seconds(1),
            started=started,
            model=hosted.id,
        )
        if prepared.cache_key is not None and timing is None:  # stored audio has no segments left to time
            entry = await self.audio_cache.get(prepared.cache_key)
            if entry is not None:
                cut = entry.headers.get("X-Segments-Cut")
                return CachedSpeech(
                    **output,
                    body=entry.audio,
                    format=checked.format,
                    text_tokens=entry.text_tokens,
                    frames=entry.frames,
                    cut_segments=[int(index) for index in cut.split(",")] if cut else [],
                    cache="hit",
                )
        stream = SpeechStream(
            **output,
            text_tokens=text.text_tokens,
            engine=hosted.engine,
            jobs=[
                SpeechJob(
                    tokenized, params, interactive=request.interactive, chunk_schedule=self.chunk_schedule(request)
                )
                for tokenized, params in zip(text.inputs, text.params, strict=True)
            ],
            encoder=StreamEncoder(checked.format, checked.sample_rate, model.sample_rate),
            tempo=Tempo(request.speed, model.sample_rate) if request.speed != 1.0 else None,
            timeout=self.request_timeout or None,
            cache="off" if prepared.cache_key is None else "miss",
            timing=timing if request.timestamps else None,
            model_rate=model.sample_rate,
        )
        if prepared.cache_key is not None:
            stream.on_complete = lambda audio: self._store(prepared.cache_key, stream, audio)
        if start:
            stream.start()  # a full queue: 503 before any byte
        return stream

    async def clone_and_speak(
        self, request: SynthesisRequest, audio: bytes, ref_text: str | None, mode: str | None, field: str = "ref_audio"
    ) -> SpeechOutput:
        """Speech in a voice cloned from inline reference audio (the upload `field`); the clone prompt is cached by
        content hash."""
        hosted = await self.route(request, inline_clone=True)
        clone = await self.voices.clone_prompt(audio, ref_text, mode, field=field, hosted=hosted)
        return await self.speak(request, clone, hosted=hosted)

    async def check(self, request: SynthesisRequest) -> int:
        """Check everything about a request but its text, as `speak` would; returns the output sample rate."""
        model = await (await self.route(request)).manager.get_async()
        checked = await asyncio.to_thread(self._check, model, request, None)
        model.prompts.check_language(request.language)
        return checked.sample_rate

    async def _store(self, key: str, stream: SpeechStream, audio: bytes) -> None:
        headers = {"X-Segments-Cut": ",".join(map(str, stream.cut_segments))} if stream.cut_segments else {}
        entry = CachedAudio(audio, stream.media_type, stream.frames, stream.text_tokens, headers)
        await self.audio_cache.put(key, entry)

    def _check(self, model: Qwen3TTSModel, request: SynthesisRequest, clone: VoicePrompt | None) -> _Checked:
        name = request.voice or self.voices.default_voice
        voice = resolve_voice(model, self.library, name, request.instructions, clone)
        fmt, rate = audio_format(request.response_format, request.sample_rate, model.sample_rate)
        return _Checked(model, voice, request.sampling.params(model), fmt, rate)

    def _prepare(self, model: Qwen3TTSModel, request: SynthesisRequest, clone: VoicePrompt | None) -> _Prepared:
        checked = self._check(model, request, clone)
        normalize_text = self.normalize_text if request.normalize is None else request.normalize
        text = prepare_text(model, checked.voice, request.text, request.language, normalize_text, checked.params)
        log.debug("spoken as %s", [(segment.language, segment.text) for segment in text.segments])
        key = self._cache_key(model, request, checked.voice, text) if self.audio_cache else None
        return _Prepared(checked, text, key)

    def _cache_key(
        self, model: Qwen3TTSModel, request: SynthesisRequest, voice: VoiceSpec, text: PreparedText
    ) -> str | None:
        """Everything that changes the response's bytes; None for sampling without a seed (no two alike) unless
        `cache_sampled`."""
        params = text.params[0]
        if not self.cache_sampled and params.seed is None and (params.do_sample or params.subtalker_do_sample):
            return None
        return cache_key(
            {
                "entry_version": CACHE_ENTRY_VERSION,
                "checkpoint": model.fingerprint,
                "segments": [[segment.language, segment.text] for segment in text.segments],
                "speaker": voice.speaker,
                "instruct": voice.instruct_ids,
                "voice": voice.voice.id if voice.voice is not None else None,
                "format": request.response_format,
                "sample_rate": request.sample_rate,
                "speed": request.speed,
                "chunks": self.chunk_schedule(request),  # the codec's float rounding follows its chunks
                "sampling": dataclasses.asdict(params),
            }
        )
