"""The contexts of a multi-context speech socket (ElevenLabs', Cartesia's): each context a `RealtimeSession` of its
own whose channel turns its events and audio into the protocol's messages, all of them sharing the socket; a context
spoken whole leaves, its session closed beside the sender that told it so."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from ...errors import TTSError
from .realtime import RealtimeSession

SENTENCE_END = re.compile(r"[.!?;:。！？；：]$")

Send = Callable[[dict[str, Any]], Awaitable[None]]


class ContextSocket:
    """One connection's contexts by id; `send` puts one message on the socket, the contexts' senders in turn."""

    def __init__(self, send: Send):
        self.lock = asyncio.Lock()
        self._send = send
        self.contexts: dict[str, RealtimeSession] = {}
        self.closing: set[asyncio.Task] = set()  # contexts spoken whole or dropped, leaving

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self._send(message)

    async def _enter(self, context: str, session: RealtimeSession, config: dict[str, Any]) -> None:
        """Open `context` as `session` with `config`; a config the session refuses leaves nothing open."""
        await session.__aenter__()
        try:
            await session.update(config)
        except TTSError:
            await session.__aexit__(None, None, None)
            raise
        self.contexts[context] = session

    def _leave(self, context: str) -> None:
        """Close the context's session in a task of its own: this may run in its sender, which the close stops."""
        session = self.contexts.pop(context, None)
        if session is not None:
            task = asyncio.create_task(session.__aexit__(None, None, None))
            self.closing.add(task)
            task.add_done_callback(self.closing.discard)

    async def aclose(self) -> None:
        """Stop every context (the client left or closed the socket)."""
        for session in list(self.contexts.values()):
            await session.__aexit__(None, None, None)
        self.contexts.clear()
        if self.closing:
            await asyncio.wait(list(self.closing))


def joined(session: RealtimeSession, text: str) -> str:
    """Text as it continues the context's: Pipecat sends each sentence with no space after the one before it."""
    pending = session.splitter.pending
    if pending and SENTENCE_END.search(pending) and not text[:1].isspace():
        return " " + text
    return text
