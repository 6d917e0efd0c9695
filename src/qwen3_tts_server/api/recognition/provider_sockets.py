"""How the live sockets of other providers' protocols (Deepgram's, Cartesia's; `service/recognition/
live_protocol.py`) are served: the key checked, the query read into a listener (a refusal is the protocol's error
message, then close 1008, or 1013 when every live slot is taken), then binary messages are audio and text ones the
protocol's commands, a refused one answered with its error and the socket going on. A socket idle for
LIVE_IDLE_TIMEOUT seconds (`live_idle.py`: no audio, no command taken, nothing sent) gets an error, then close 1001;
once the client is gone, its session's work stops at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from ...errors import IdleTimeoutError, TTSError
from ...service.recognition.live_protocol import LiveProtocol
from ..dependencies import Services
from ..limits import refusal_close_code
from ..websockets import accepted, close_quietly
from .live_idle import IDLE_CLOSE_CODE, EventSender, IdleClock

OpenListener = Callable[[EventSender], LiveProtocol]  # raises TTSError for a bad query
Refusal = Callable[[TTSError], dict[str, Any]]  # an error as the protocol's message


async def serve_listener(
    websocket: WebSocket, services: Services, open_listener: OpenListener, refusal: Refusal, error_type: str
) -> None:
    settings = services.settings
    if not await accepted(websocket, settings.accepted_keys()):
        return
    idle = IdleClock(settings.live_idle_timeout)
    send = EventSender(websocket, idle, error_type)
    try:
        listener = open_listener(send)
        await listener.start()
    except TTSError as error:  # a bad query, no transcriber hosted, every live slot taken, the model not loaded
        await send(refusal(error))
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
                await send(refusal(error))
                continue
            if used:
                idle.touch()
    except IdleTimeoutError as error:
        await send(refusal(error))
        await close_quietly(websocket, IDLE_CLOSE_CODE)
    except (WebSocketDisconnect, WebSocketDisconnected):
        pass
    finally:
        await listener.cancel()
