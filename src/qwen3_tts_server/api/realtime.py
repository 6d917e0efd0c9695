"""WS /v1/audio/speech/ws: real-time speech with incremental text and barge-in (protocol in service/realtime.py)."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from ..http_contract import key_accepted
from ..service.realtime import RealtimeSession

router = APIRouter()


def authorized(websocket: WebSocket, api_key: str | None) -> bool:
    """The key as a bearer header, or as `?api_key=` for browsers, which cannot set WebSocket headers."""
    return key_accepted(api_key, websocket.headers.get("authorization"), websocket.query_params.get("api_key"))


@router.websocket("/v1/audio/speech/ws")
async def speech_ws(websocket: WebSocket) -> None:
    state = websocket.app.state
    await websocket.accept()
    if not authorized(websocket, state.api_key):
        # Closed after the handshake so that browsers, which never see a refused handshake's status, learn why.
        await websocket.close(code=1008, reason="missing or wrong API key")
        return
    async with RealtimeSession(state.speech, websocket) as session:
        try:
            while (message := await websocket.receive())["type"] != "websocket.disconnect":
                await session.handle(message.get("text"))
        except WebSocketDisconnect:  # gone while we answered: leaving the session cancels its jobs
            pass
