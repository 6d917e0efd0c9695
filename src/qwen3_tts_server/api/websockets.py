"""What every WebSocket route does first: accept the connection and check its API key."""

from __future__ import annotations

from contextlib import suppress

from fastapi import WebSocket, WebSocketDisconnect

from ..http_contract import KEY_HEADERS, key_accepted

MAX_CLOSE_REASON = 123  # bytes of UTF-8 a close frame's reason may hold


def authorized(websocket: WebSocket, keys: list[str]) -> bool:
    """A key as a bearer header, in one of KEY_HEADERS (ElevenLabs', Cartesia's), or as `?api_key=` for browsers,
    which cannot set WebSocket headers."""
    headers = websocket.headers
    others = [headers.get(name) for name in KEY_HEADERS]
    return key_accepted(keys, headers.get("authorization"), *others, websocket.query_params.get("api_key"))


async def accepted(websocket: WebSocket, keys: list[str]) -> bool:
    """Accept the WebSocket; False, once closed with 1008, when its key is missing or wrong (closed after the
    handshake so that browsers, which never see a refused handshake's status, learn why)."""
    await websocket.accept()
    if authorized(websocket, keys):
        return True
    await close_quietly(websocket, 1008, "missing or wrong API key")
    return False


async def close_quietly(websocket: WebSocket, code: int = 1000, reason: str = "") -> None:
    """Close the socket, the reason cut to what a close frame holds (123 bytes of UTF-8); quietly when the client
    left first (closing a socket it dropped raises WebSocketDisconnect, one already closed a RuntimeError)."""
    reason = reason.encode()[:MAX_CLOSE_REASON].decode(errors="ignore")
    with suppress(WebSocketDisconnect, RuntimeError):
        await websocket.close(code, reason)
