"""Cartesia's speech routes, for clients that speak Cartesia (LiveKit's and Pipecat's Cartesia plugins with their base
URL set to this server): the multi-context socket (protocol in service/speech/cartesia.py) and the HTTP generations,
whole audio (`/tts/bytes`) or server-sent events (`/tts/sse`). The key is taken from `X-API-Key` as from
`Authorization`; `Cartesia-Version` and `?cartesia_version=`, whatever their value, change nothing."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from ...service.speech.cartesia import HTTP_CONTAINERS, CartesiaSocket, GenerationRequest, sse_events
from ...service.speech.realtime import ChannelClosed
from ..dependencies import ServicesDep
from ..websockets import accepted, close_quietly
from .realtime import SocketChannel, parse_request
from .routes import STREAM_HEADERS, started_audio

router = APIRouter()


@router.websocket("/tts/websocket")
async def tts_websocket(websocket: WebSocket, services: ServicesDep) -> None:
    if not await accepted(websocket, services.settings.accepted_keys()):
        return
    timestamps = services.speech.aligner is not None
    limit = services.settings.max_pending_text
    socket = CartesiaSocket(services.speech, SocketChannel(websocket).send_event, parse_request, limit, timestamps)
    try:
        while (message := await websocket.receive())["type"] != "websocket.disconnect":
            await socket.handle(message.get("text"))
    except (WebSocketDisconnect, ChannelClosed):  # gone while we answered
        pass
    finally:
        await socket.aclose()
    await close_quietly(websocket)


@router.post("/tts/bytes")
async def tts_bytes(body: GenerationRequest, services: ServicesDep) -> StreamingResponse:
    """The transcript's audio in `output_format` (raw, wav or mp3), streamed."""
    speech = await services.speech.speak(parse_request(body.fields(HTTP_CONTAINERS), body.transcript))
    audio = body.output_format.stream(await started_audio(speech))
    return StreamingResponse(audio, media_type=speech.media_type, headers=STREAM_HEADERS)


@router.post("/tts/sse")
async def tts_sse(body: GenerationRequest, services: ServicesDep) -> StreamingResponse:
    """The transcript's raw audio as server-sent `chunk` events, its words as `timestamps` ones with
    `add_timestamps` (and a ForcedAligner hosted), then `done`."""
    fields = body.fields() | {"timestamps": body.add_timestamps and services.speech.aligner is not None}
    speech = await services.speech.speak(parse_request(fields, body.transcript))
    events = sse_events(speech, body.output_format, body.context_id)
    return StreamingResponse(events, media_type="text/event-stream", headers=STREAM_HEADERS)
