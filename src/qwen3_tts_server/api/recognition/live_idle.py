"""LIVE_IDLE_TIMEOUT: a live WebSocket that goes that long without a message from its client or to it is closed, so
that silent clients cannot hold every live session slot (LIVE_MAX_SESSIONS). A message of any kind counts (audio,
an action, a binary keepalive), and so does anything the server sends: a client waiting for its transcript is not
idle. The route sends its protocol's error (408 idle_timeout), then closes with 1001 (going away): the server ends a
session nobody uses, as proxies and gateways close idle connections."""

from __future__ import annotations

import asyncio
import time

from starlette.types import Message
from starlette.websockets import WebSocket

from ...errors import IdleTimeoutError

IDLE_CLOSE_CODE = 1001


class IdleClock:
    """When the socket last carried a message; `timeout` 0: never idle."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()

    async def receive(self, websocket: WebSocket) -> Message:
        """The client's next message; IdleTimeoutError once the socket has been idle for `timeout` seconds."""
        while self.timeout:
            left = self.last + self.timeout - time.monotonic()
            if left <= 0:
                raise IdleTimeoutError(f"no message for {self.timeout:g} s (LIVE_IDLE_TIMEOUT): the session is closed")
            try:
                message = await asyncio.wait_for(websocket.receive(), left)
            except asyncio.TimeoutError:
                continue  # what the server sent meanwhile may have moved the deadline
            self.touch()
            return message
        return await websocket.receive()
