"""From an API speech request to a prepared `SpeechStream`: voice, text front end, sampling, engine jobs."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from ..api.schemas import SpeechRequest
from ..engine.engine import Engine
from ..engine.jobs import SpeechJob
from ..engine.model_manager import ModelManager
from ..errors import InvalidInputError
from ..model.voice_prompt import VoicePrompt
from ..text.frontend import TextSegment, text_segments
from .cloning import VoiceCloner
from .encoding import StreamEncoder
from .speech_stream import SpeechStream
from .tempo import Tempo
from .voice_library import VoiceLibrary
from .voices import resolve_voice

log = logging.getLogger(__name__)


class SpeechService:
    """What every speech route shares: the engine, the model, the voice library and the clone prompts."""

    def __init__(
        self,
        engine: Engine,
        models: ModelManager,
        library: VoiceLibrary,
        cloner: VoiceCloner,
        normalize_text: bool = True,
    ):
        self.engine = engine
        self.models = models
        self.library = library
        self.cloner = cloner
        self.normalize_text = normalize_text  # the default for requests that do not say

    async def prepare(self, body: SpeechRequest, clone: VoicePrompt | None = None) -> SpeechStream:
        """Validate everything up front, so that errors are answered before any audio byte is sent. `clone`
        is an inline cloned voice (the clone route); otherwise `body.voice` names the voice. The text front end
        and tokenizing run in a worker thread: a 4096-character input must not hold up other streams."""
        jobs, segments, text_tokens = await asyncio.to_thread(self._plan, body, clone)
        return SpeechStream(
            self.engine,
            jobs,
            segments,
            StreamEncoder(body.response_format, body.sample_rate),
            text_tokens=text_tokens,
            tempo=Tempo(body.speed) if body.speed != 1.0 else None,
        )

    def _plan(self, body: SpeechRequest, clone: VoicePrompt | None) -> tuple[list[SpeechJob], list[TextSegment], int]:
        """The engine jobs of a request (one per text segment), its segments and its count of text tokens."""
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
        return jobs, segments, sum(len(model.prompts.text_ids(request.text)) for request in requests)
