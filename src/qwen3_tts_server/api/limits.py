"""What one connection may take from the server, as one pure ASGI middleware inside the request observer (so
that every refusal is logged and counted):

- request headers: at most MAX_HEADERS fields and MAX_HEADER_BYTES in all (uvicorn with httptools sets no
  limit of its own), else 431;
- a request body: at most MAX_BODY_BYTES (a multipart upload: the upload limit plus the form's overhead), else
  413, before reading when Content-Length says so, as soon as the limit is passed when it is sent without one;
- the time to send it: BODY_TIMEOUT seconds for the whole body from the app's first read, else 408. Once the
  body is in, nothing is timed, so a streamed response may take as long as it takes;
- open WebSockets: at most MAX_WEBSOCKETS; past it a new one is accepted and closed at once with 1013 (try
  again later), which every client sees, where a refused handshake would reach browsers as a bare failure.
- live recognition sessions: at most LIVE_MAX_SESSIONS a transcriber (`service/recognition/live_slots.py`); the live
  routes close a refused one with 1013 too, after the error (`refusal_close_code`).

A refusal answers at once with the error envelope and `Connection: close`, and closes once what the client still
sends of its body is read and dropped (within BODY_TIMEOUT: the length it declared, or up to 8 times the limit): a
client that reads only once it has written its body whole would otherwise find the connection reset under its
answer. Whatever the app then tries to send is dropped, and its reads see the client gone.
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..errors import (
    BodyTimeoutError,
    HeadersTooLargeError,
    LiveSessionLimitError,
    PayloadTooLargeError,
    TTSError,
    error_response_body,
)
from ..http_contract import BodyDeadline
from .context import request_context
from .schemas import MAX_UPLOAD_BYTES, RAW_AUDIO_PATHS, TRANSCRIPTION_PATHS

# A speech body holds at most 4096 characters of input and of instructions: even with every character
# written as a \u escape that is under 100 KiB, so 1 MiB leaves room for any legitimate JSON body.
MAX_BODY_BYTES = 1 << 20
MULTIPART_OVERHEAD = 64 * 1024  # room for the form's other fields and boundaries
MAX_HEADERS = 100  # Apache's default; browsers and SDKs send a few dozen at most
MAX_HEADER_BYTES = 64 * 1024  # names and values together: room for large cookies and tokens
WS_TRY_AGAIN_LATER = 1013
DRAIN_WAIT = 1.0  # seconds a refused body's next piece is waited for before the connection is closed anyway
DRAIN_UNDECLARED = 8  # a body sent without Content-Length is read to at most this many times the limit once refused


def refusal_close_code(error: TTSError) -> int:
    """The close code of a WebSocket whose session could not start: 1013 (try again later) when every live session
    slot is taken, 1011 (the server failed) otherwise."""
    return WS_TRY_AGAIN_LATER if isinstance(error, LiveSessionLimitError) else 1011


def install_limits(app: FastAPI, settings: Settings) -> None:
    """Add the limits to `app`: call it before adding the request observer, which must stay outside them."""
    app.add_middleware(
        RequestLimits,
        max_websockets=settings.max_websockets,
        body_timeout=settings.body_timeout,
        transcription_bytes=settings.max_transcription_bytes,
    )


class RequestLimits:
    def __init__(self, app: ASGIApp, max_websockets: int, body_timeout: float, transcription_bytes: int):
        self.app = app
        self.transcription_bytes = transcription_bytes  # MAX_TRANSCRIPTION_BYTES, for the routes that transcribe
        self.max_websockets = max_websockets  # 0: no limit
        self.body_timeout = body_timeout
        self.open_websockets = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.max_websockets and self.open_websockets >= self.max_websockets:
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            reason = f"the server's {self.max_websockets} WebSocket connections are in use; try again later"
            await send({"type": "websocket.close", "code": WS_TRY_AGAIN_LATER, "reason": reason})
            return
        self.open_websockets += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open_websockets -= 1

    def _body_limit(self, scope: Scope) -> int:
        if scope.get("path") in RAW_AUDIO_PATHS:  # the body is the recording itself
            return self.transcription_bytes
        content_type = HTTPConnection(scope).headers.get("content-type", "")
        if not content_type.startswith("multipart/"):
            return MAX_BODY_BYTES
        upload = self.transcription_bytes if scope.get("path") in TRANSCRIPTION_PATHS else MAX_UPLOAD_BYTES
        return upload + MULTIPART_OVERHEAD

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = GuardedRequest(scope, receive, send, self._body_limit(scope), self.body_timeout)
        headers = scope["headers"]
        if len(headers) > MAX_HEADERS or sum(len(name) + len(value) for name, value in headers) > MAX_HEADER_BYTES:
            limits = f"at most {MAX_HEADERS} fields and {MAX_HEADER_BYTES >> 10} KiB in all"
            await request.refuse(HeadersTooLargeError(f"the request headers are too large: {limits}"))
            return
        declared = _content_length(scope)
        if declared is not None and declared > request.max_bytes:
            await request.refuse(request.too_large())
            return
        await self.app(scope, request.receive, request.send)


class GuardedRequest:
    """One request's body reads, counted and timed, and its response, dropped once the request was refused."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, max_bytes: int, timeout: float):
        self.scope = scope
        self._receive = receive
        self._send = send
        self.max_bytes = max_bytes
        self.deadline = BodyDeadline(timeout)
        self.received = 0
        self.body_done = False
        self.response_started = False
        self.refused = False

    def too_large(self) -> PayloadTooLargeError:
        return PayloadTooLargeError(f"the request body is larger than the {_size(self.max_bytes)} limit")

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        if self.body_done:
            return await self._receive()
        try:
            message = await self.deadline.read(self._receive)
        except asyncio.TimeoutError:
            seconds = self.deadline.seconds
            return await self.refuse(BodyTimeoutError(f"the request body took longer than {seconds:g} s"))
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.max_bytes:
                return await self.refuse(self.too_large())
            self.body_done = not message.get("more_body", False)
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        self.response_started = self.response_started or message["type"] == "http.response.start"
        await self._send(message)

    async def refuse(self, exc: TTSError) -> Message:
        """Answer with `exc` (unless a response has begun) and close the connection; the app's reads from now
        on see the client gone. The answer is sent at once, but ends only once what the client still sends of
        its body is read (`_drain`)."""
        if not self.response_started:
            request_context(HTTPConnection(self.scope)).error_type = exc.code
            response = JSONResponse(error_response_body(exc), exc.status, headers={"connection": "close"})
            await self._send({"type": "http.response.start", "status": exc.status, "headers": response.raw_headers})
            await self._send({"type": "http.response.body", "body": response.body, "more_body": True})
            if not isinstance(exc, BodyTimeoutError):
                await self._drain()
            await self._send({"type": "http.response.body", "body": b""})
        self.refused = True
        return {"type": "http.disconnect"}

    async def _drain(self) -> None:
        """Read and drop the rest of the body while it keeps coming (each piece within DRAIN_WAIT, all within
        BODY_TIMEOUT): all the Content-Length it declared, or (chunked, its end unknown) up to DRAIN_UNDECLARED times
        the limit. A client that writes its whole body before it reads the answer (httpx.AsyncClient, the openai
        SDK's async client) would otherwise see the connection reset by the close, its answer unread. Reading costs
        no memory: every piece is dropped."""
        declared = _content_length(self.scope)
        drained, most = self.received, DRAIN_UNDECLARED * self.max_bytes if declared is None else declared
        while not self.body_done and drained <= most:
            try:
                message = await asyncio.wait_for(self.deadline.read(self._receive), DRAIN_WAIT)
            except asyncio.TimeoutError:
                return
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            self.body_done = not message.get("more_body", False)


def _content_length(scope: Scope) -> int | None:
    declared = HTTPConnection(scope).headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count % (1 << 20) == 0 else f"{count >> 10} KiB"
