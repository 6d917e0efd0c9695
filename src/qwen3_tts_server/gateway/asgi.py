"""Raw ASGI types, the gateway's own replies (JSON bodies, OpenAI's error envelope, a WebSocket closed on an
error) and what a proxied request's log line reports."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..http_contract import error_document

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

CLIENT_CLOSED = 499  # logged status of a request whose client went away first (nginx's convention)
WS_INTERNAL_ERROR = 1011


@dataclass
class Outcome:
    """What a proxied request's log line reports."""

    status: int
    request_id: str | None = None


class WorkerLost(Exception):
    """The worker went away after the response had started: raised to abort the client's connection, so that
    it sees an incomplete response rather than a silently short one."""


async def send_json(send: Send, status: int, payload: Any) -> None:
    await _send_body(send, status, json.dumps(payload).encode(), "application/json")


async def send_text(send: Send, status: int, text: str, content_type: str) -> None:
    await _send_body(send, status, text.encode(), content_type)


async def _send_body(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_error(send: Send, status: int, message: str, code: str) -> None:
    await send_json(send, status, error_document(status, message, code))


async def close_with_error(send: Send, error: dict[str, Any]) -> int:
    """Send an `error` event and close with 1011 (an accepted WebSocket); returns the close code."""
    with contextlib.suppress(Exception):  # the client may be gone already
        await send({"type": "websocket.send", "text": json.dumps({"type": "error", "error": error})})
        await send({"type": "websocket.close", "code": WS_INTERNAL_ERROR})
    return WS_INTERNAL_ERROR
