"""LIVE_IDLE_TIMEOUT: a live WebSocket that goes that long without use is closed, so that clients that send nothing
of use cannot hold every live session slot (LIVE_MAX_SESSIONS). Use is what the route `touch`es the clock for: input
that carries something (audio, a control message taken) and what the session sends of its own (transcripts, speech
boundaries: a client waiting for its transcript is not idle). Messages that carry nothing (an empty or a binary
frame where none is meant, JSON that is refused) and the errors they are answered with do not count. The route
sends its protocol's error (408 idle_timeout), then closes with 1001 (going away): the server ends a session nobody
uses, as proxies and gateways close idle connections."""

from __future__ import annotations

import asyncio
import json
import time

from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from ...errors import IdleTimeoutError

IDLE_CLOSE_CODE = 1001


class IdleClock:
    """When the session was last of use; `timeout` 0: never idle."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()

    async def receive(self, websocket: WebSocket) -> Message:
        """The client's next message; IdleTimeoutError once the session has been idle for `timeout` seconds."""
        while self.timeout:
            left = self.last + self.timeout - time.monotonic()
            if left <= 0:
                raise IdleTimeoutError(
                    f"nothing of use for {self.timeout:g} s (LIVE_IDLE_TIMEOUT): the session is closed"
                )
            try:
                return await asyncio.wait_for(websocket.receive(), left)
            except asyncio.TimeoutError:
                continue  # a use meanwhile may have moved the deadline
        return await websocket.receive()


class EventSender:
    """A protocol's events as JSON text messages; once the socket is gone, nothing more is sent. Each but an error
    (its `type` is `error_type`) is of use."""

    def __init__(self, websocket: WebSocket, idle: IdleClock, error_type: str = "error"):
        self.websocket, self.idle, self.error_type, self.open = websocket, idle, error_type, True

    async def __call__(self, payload: dict) -> None:
        if not self.open:
            return
        try:
            await self.websocket.send_text(json.dumps(payload, ensure_ascii=False))
            if payload["type"] != self.error_type:
                self.idle.touch()
        except (WebSocketDisconnect, WebSocketDisconnected, RuntimeError):
            self.open = False
