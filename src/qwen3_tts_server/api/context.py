"""One context object per request: created by the request observer (api/observability.py), filled in by the
routes and the error handlers, read back by the observer for the request's log line and metrics."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

if TYPE_CHECKING:  # only named: the context is shared by both families' routes
    from ..service.speech.stream import SpeechOutput

_SCOPE_KEY = "qwen3_tts_server.request"


@dataclass
class RequestContext:
    request_id: str
    speech: SpeechOutput | None = None  # a speech route's audio
    voice: str | None = None
    format: str | None = None
    characters: int | None = None
    error_type: str | None = None  # the typed error the request was answered with

    def attach(self, scope: MutableMapping[str, Any]) -> None:
        scope[_SCOPE_KEY] = self

    def record_speech(self, speech: SpeechOutput, voice: str, format: str, characters: int) -> None:
        self.speech, self.voice, self.format, self.characters = speech, voice, format, characters


def request_context(connection: HTTPConnection) -> RequestContext:
    return connection.scope[_SCOPE_KEY]
