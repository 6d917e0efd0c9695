"""WS /v1/realtime?intent=transcription: OpenAI's realtime transcription sessions (protocol in
service/recognition/realtime.py). The beta form is the one asked for with the header `OpenAI-Beta: realtime=v1`;
`?model=` (which some clients add) names the transcriber as `input_audio_transcription.model` does. Client events are
JSON text frames: a binary frame is answered with an `error` event, the session going on. A session idle for
LIVE_IDLE_TIMEOUT seconds (`live_idle.py`: no audio, no event taken, nothing of its own sent) gets an `idle_timeout`
error, then close 1001; once the client is gone, its session's work stops at once."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from ...errors import IdleTimeoutError, InvalidInputError, TTSError
from ...service.recognition.realtime import RealtimeTranscription, error_event
from ..dependencies import ServicesDep
from ..limits import refusal_close_code
from ..websockets import accepted, close_quietly
from .live_idle import IDLE_CLOSE_CODE, EventSender, IdleClock

router = APIRouter()


BINARY_FRAME = "a client event is a JSON object in a text frame, not a binary frame"


@router.websocket("/v1/realtime")
async def realtime_ws(websocket: WebSocket, services: ServicesDep) -> None:
    settings = services.settings
    if not await accepted(websocket, settings.accepted_keys()):
        return
    idle = IdleClock(settings.live_idle_timeout)
    send = EventSender(websocket, idle)
    if websocket.query_params.get("intent") != "transcription":
        refusal = InvalidInputError("this server serves realtime transcription sessions: ?intent=transcription")
        await send(error_event(refusal))
        await close_quietly(websocket, 1008)
        return
    beta = "realtime=v1" in websocket.headers.get("openai-beta", "")
    session = RealtimeTranscription(
        services.registry, services.recognition, send, beta, settings.live_max_pending_seconds
    )
    session.options.model = websocket.query_params.get("model")
    try:
        await session.open()
    except TTSError as error:  # no transcriber hosted, every live session slot taken, or the model could not load
        await send(error_event(error))
        await close_quietly(websocket, refusal_close_code(error))
        return
    try:
        while (message := await idle.receive(websocket))["type"] != "websocket.disconnect":
            if message.get("text") is None:
                await send(error_event(InvalidInputError(BINARY_FRAME, param="event")))
            elif await session.handle(message["text"]):
                idle.touch()
    except IdleTimeoutError as error:
        await send(error_event(error))
        await close_quietly(websocket, IDLE_CLOSE_CODE)
    except (WebSocketDisconnect, WebSocketDisconnected):
        pass
    finally:
        await session.close()
