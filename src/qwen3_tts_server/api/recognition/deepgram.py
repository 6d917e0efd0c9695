"""Deepgram's listening routes, for clients that speak Deepgram (LiveKit's and Pipecat's Deepgram plugins, Deepgram's
SDK, with their base URL set to this server): the live socket (protocol in service/recognition/deepgram.py) and the
prerecorded transcription of a recording posted as the body. The key is taken from `Authorization: Token <key>` as
from `Bearer`. A live socket idle for LIVE_IDLE_TIMEOUT seconds (no audio, no message taken; `KeepAlive` counts, as
Deepgram counts it) gets an `Error`, then close 1001."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from ...errors import IdleTimeoutError, InvalidInputError, TTSError, error_body
from ...service.deepgram import error_message
from ...service.recognition.deepgram import DeepgramListener, listen_options, prerecorded_response
from ...service.recognition.routing import route_recognizer
from ...service.recognition.subtitles import length_timed_words
from ...service.recognition.transcription import TranscriptionRequest
from ..dependencies import ServicesDep
from ..limits import refusal_close_code
from ..websockets import accepted, close_quietly
from .live_idle import IDLE_CLOSE_CODE, EventSender, IdleClock

router = APIRouter()


@router.websocket("/v1/listen")
async def listen_socket(websocket: WebSocket, services: ServicesDep) -> None:
    settings = services.settings
    if not await accepted(websocket, settings.accepted_keys()):
        return
    idle = IdleClock(settings.live_idle_timeout)
    send = EventSender(websocket, idle, error_type="Error")
    try:
        options = listen_options(websocket.query_params.multi_items())
        service = services.recognition[route_recognizer(services.registry, options.model).id]
        listener = DeepgramListener(service, options, send, settings.live_max_pending_seconds)
        await listener.start()
    except TTSError as error:  # a bad query, no transcriber hosted, every live slot taken, the model not loaded
        await send(error_message(error_body(error)))
        await close_quietly(websocket, 1008 if error.status < 500 else refusal_close_code(error))
        return
    try:
        while (message := await idle.receive(websocket))["type"] != "websocket.disconnect":
            try:
                if message.get("bytes") is not None:
                    used = listener.audio(message["bytes"])
                elif not (used := listener.control(message.get("text") or "")):
                    await listener.finish()
                    await close_quietly(websocket)
                    return
            except TTSError as error:  # refused: said, and the socket goes on
                await send(error_message(error_body(error)))
                continue
            if used:
                idle.touch()
    except IdleTimeoutError as error:
        await send(error_message(error_body(error)))
        await close_quietly(websocket, IDLE_CLOSE_CODE)
    except (WebSocketDisconnect, WebSocketDisconnected):
        pass
    finally:
        await listener.cancel()


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
