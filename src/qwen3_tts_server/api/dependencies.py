"""What routes are given, typed: the app's services and the request's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from ..config import Settings
from ..engine.registry import ModelRegistry
from ..service.metrics import Metrics
from .context import RequestContext, request_context

if TYPE_CHECKING:  # only named here: each family's routes import their own services
    from ..service.recognition.transcription import RecognitionService
    from ..service.recognition.translation import Translator
    from ..service.speech.audio_cache import AudioCache
    from ..service.speech.synthesis import SpeechService
    from ..service.speech.voices import VoiceService


@dataclass(frozen=True)
class Services:
    """Everything the app's routes use, built once by `create_app`."""

    settings: Settings
    registry: ModelRegistry
    speech: SpeechService
    voices: VoiceService
    metrics: Metrics
    audio_cache: AudioCache | None
    recognition: dict[str, RecognitionService]  # by hosted recogniser id
    translator: Translator


# Async, though nothing here awaits: FastAPI runs a plain `def` dependency on a worker thread, a thread hop (and a
# worker thread that comes and goes) per request for an attribute read.
async def services(connection: HTTPConnection) -> Services:
    return connection.app.state.services


async def current_context(connection: HTTPConnection) -> RequestContext:
    return request_context(connection)


ServicesDep = Annotated[Services, Depends(services)]
ContextDep = Annotated[RequestContext, Depends(current_context)]
