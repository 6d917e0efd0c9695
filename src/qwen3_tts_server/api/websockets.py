"""What every WebSocket route does first: accept the connection and check its API key."""

from __future__ import annotations

from fastapi import WebSocket

from ..http_contract import key_accepted


def authorized(websocket: WebSocket, keys: list[str]) -> bool:
    """A key as a bearer header, as ElevenLabs' `xi-api-key` header, or as `?api_key=` for browsers, which cannot set
    WebSocket headers."""
    headers = websocket.headers
    return key_accepted(
        keys, headers.get("authorization"), headers.get("xi-api-key"), websocket.query_params.get("api_key")
    )


async def accepted(websocket: WebSocket, keys: list[str]) -> bool:
    """Accept the WebSocket; False, once closed with 1008, when its key is missing or wrong (closed after the
    handshake so that browsers, which never see a refused handshake's status, learn why)."""
    await websocket.accept()
    if authorized(websocket, keys):
        return True
    await websocket.close(code=1008, reason="missing or wrong API key")
    return False
