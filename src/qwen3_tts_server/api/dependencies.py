"""What routes are given, typed: the app's services and the request's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from ..config import Settings
from ..engine.registry import ModelRegistry
from ..service.audio_cache import AudioCache
from ..service.metrics import Metrics
from ..service.recognition import RecognitionService
from ..service.speech import SpeechService
from ..service.translation import Translator
from ..service.voices import VoiceService
from .context import RequestContext, request_context


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


async def speech_service(connection: HTTPConnection) -> SpeechService:
    return connection.app.state.services.speech


async def voice_service(connection: HTTPConnection) -> VoiceService:
    return connection.app.state.services.voices


async def current_context(connection: HTTPConnection) -> RequestContext:
    return request_context(connection)


ServicesDep = Annotated[Services, Depends(services)]
SpeechServiceDep = Annotated[SpeechService, Depends(speech_service)]
VoiceServiceDep = Annotated[VoiceService, Depends(voice_service)]
ContextDep = Annotated[RequestContext, Depends(current_context)]
