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


def services(connection: HTTPConnection) -> Services:
    return connection.app.state.services


def speech_service(connection: HTTPConnection) -> SpeechService:
    return services(connection).speech


def voice_service(connection: HTTPConnection) -> VoiceService:
    return services(connection).voices


ServicesDep = Annotated[Services, Depends(services)]
SpeechServiceDep = Annotated[SpeechService, Depends(speech_service)]
VoiceServiceDep = Annotated[VoiceService, Depends(voice_service)]
ContextDep = Annotated[RequestContext, Depends(request_context)]
