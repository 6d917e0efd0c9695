"""Deepgram's listening routes, for clients that speak Deepgram (LiveKit's and Pipecat's Deepgram plugins, Deepgram's
SDK, with their base URL set to this server): the live socket (protocol in service/recognition/deepgram.py) and the
prerecorded transcription of a recording posted as the body. The key is taken from `Authorization: Token <key>` as
from `Bearer`; the socket is served as every provider's live socket is (`provider_sockets.py`: `KeepAlive` is a
command taken, so it keeps an idle socket open, as Deepgram counts it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, WebSocket

from ...errors import InvalidInputError, error_body
from ...service.deepgram import error_message
from ...service.recognition.deepgram import DeepgramListener, listen_options, prerecorded_response
from ...service.recognition.routing import route_recognizer
from ...service.recognition.subtitles import length_timed_words
from ...service.recognition.transcription import TranscriptionRequest
from ..dependencies import ServicesDep
from .live_idle import EventSender
from .provider_sockets import serve_listener

router = APIRouter()


@router.websocket("/v1/listen")
async def listen_socket(websocket: WebSocket, services: ServicesDep) -> None:
    def listener(send: EventSender) -> DeepgramListener:
        options = listen_options(websocket.query_params.multi_items())
        service = services.recognition[route_recognizer(services.registry, options.model).id]
        return DeepgramListener(service, options, send, services.settings.live_max_pending_seconds)

    await serve_listener(websocket, services, listener, lambda error: error_message(error_body(error)), "Error")


@router.post("/v1/listen")
async def listen(request: Request, services: ServicesDep) -> dict[str, Any]:
    """A recording (any format PyAV reads) posted as the body, transcribed whole: Deepgram's prerecorded response,
    its words timed by the transcriber's aligner where one is hosted, else by their length."""
    options = listen_options(list(request.query_params.multi_items()), live=False)
    if request.headers.get("content-type", "").startswith("application/json"):
        raise InvalidInputError("this server fetches no URL: post the recording itself as the body", param="url")
    hosted = route_recognizer(services.registry, options.model)
    audio = await request.body()  # within MAX_TRANSCRIPTION_BYTES (`api/limits.py`)
    if not audio:
        raise InvalidInputError("the body is empty: post the recording", param="file")
    timed = hosted.aligner is not None
    transcription = TranscriptionRequest(audio, options.language, options.context, timestamps=timed)
    transcript = await services.recognition[hosted.id].transcribe(transcription)
    words = transcript.words if timed else length_timed_words(transcript)
    return prerecorded_response(options, transcript, words, audio)
