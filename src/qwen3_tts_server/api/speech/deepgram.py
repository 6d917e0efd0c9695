"""Deepgram's speech routes, for clients that speak Deepgram (LiveKit's and Pipecat's Deepgram plugins with their base
URL set to this server): the streaming socket (protocol in service/speech/deepgram.py) and the HTTP speech both
plugins post. The key is taken from `Authorization: Token <key>` as from `Bearer`."""

from __future__ import annotations

from contextlib import suppress

from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ...errors import TTSError, checked, error_body
from ...service.deepgram import error_message
from ...service.speech.deepgram import DeepgramChannel, DeepgramSocket, metadata, speak_options
from ...service.speech.realtime import ChannelClosed
from ..dependencies import ServicesDep
from ..websockets import accepted, close_quietly
from .realtime import SocketChannel, parse_request
from .routes import STREAM_HEADERS, started_audio

router = APIRouter()


class SpeakQuery(BaseModel):
    """The query both routes take, checked by us: FastAPI's own check of a WebSocket's query refuses the handshake
    with a 403, which reads as a wrong key. Deepgram's other values (`bit_rate`, `mip_opt_out`, `tag`, ...) change
    nothing here and are ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    encoding: str | None = None
    sample_rate: int | None = Field(None, ge=8000, le=48000)
    speed: float | None = Field(None, allow_inf_nan=False)
    container: str | None = None


class SpeakBody(BaseModel):
    text: str


@router.websocket("/v1/speak")
async def speak_socket(websocket: WebSocket, services: ServicesDep) -> None:
    if not await accepted(websocket, services.settings.accepted_keys()):
        return
    wire = SocketChannel(websocket)
    try:
        query = checked(SpeakQuery, dict(websocket.query_params))
        options = speak_options(query.model, query.encoding, query.sample_rate, query.speed)
        await services.speech.check(parse_request(options.fields, "probe"))
    except TTSError as exc:  # refused before anything is spoken: said, then closed
        with suppress(ChannelClosed):
            await wire.send_event(error_message(error_body(exc)))
        await close_quietly(websocket, 1008, str(exc))
        return
    channel = DeepgramChannel(wire.send_event, wire.send_audio)
    limit = services.settings.max_pending_text
    try:
        await wire.send_event(metadata(options.model))
        async with DeepgramSocket(services.speech, channel, parse_request, options.fields, limit) as socket:
            while (message := await websocket.receive())["type"] != "websocket.disconnect":
                if not await socket.handle(message.get("text")):
                    break
    except (WebSocketDisconnect, ChannelClosed):  # gone while we answered: leaving the session cancels its jobs
        return
    await close_quietly(websocket)


@router.post("/v1/speak")
async def speak(body: SpeakBody, request: Request, services: ServicesDep) -> StreamingResponse:
    """Deepgram's speech over HTTP: the text's audio in the query's `encoding` (and `container`), streamed."""
    query = checked(SpeakQuery, dict(request.query_params))
    options = speak_options(query.model, query.encoding, query.sample_rate, query.speed, query.container, http=True)
    speech = await services.speech.speak(parse_request(options.fields, body.text))
    headers = STREAM_HEADERS | {"dg-model-name": options.model, "dg-char-count": str(len(body.text))}
    return StreamingResponse(await started_audio(speech), media_type=speech.media_type, headers=headers)
