"""WS /v1/audio/speech/ws: real-time speech with incremental text and barge-in (protocol in service/realtime.py)."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from ..service.realtime import RealtimeSession
from .auth import bearer_matches

router = APIRouter()


def authorized(websocket: WebSocket, api_key: str | None) -> bool:
    """The key as a bearer header, or as `?api_key=` for browsers, which cannot set WebSocket headers."""
    headers, query = websocket.headers, websocket.query_params
    return bearer_matches(headers.get("authorization"), api_key) or bearer_matches(query.get("api_key"), api_key)


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
