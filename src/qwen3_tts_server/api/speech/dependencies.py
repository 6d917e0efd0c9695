"""What the speech routes are given, typed: the speech and voice services."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from ...service.speech.synthesis import SpeechService
from ...service.speech.voices import VoiceService


async def speech_service(connection: HTTPConnection) -> SpeechService:
    return connection.app.state.services.speech


async def voice_service(connection: HTTPConnection) -> VoiceService:
    return connection.app.state.services.voices


SpeechServiceDep = Annotated[SpeechService, Depends(speech_service)]
VoiceServiceDep = Annotated[VoiceService, Depends(voice_service)]
