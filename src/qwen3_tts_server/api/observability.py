"""The request id, the one log line per request and the request metrics, as an ASGI middleware around the
whole app. A streamed response is logged when its last byte has gone (or the client went away), so the line
carries the full latency breakdown; uvicorn's own access log is off in favour of this line. A graceful stop is
summed up in one line too (ShutdownDrain)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import TTSError
from ..logs import request_id
from ..service.metrics import Metrics, RequestOutcome
from .context import RequestContext
from .errors import envelope

log = logging.getLogger("qwen3_tts_server.request")
drain_log = logging.getLogger("qwen3_tts_server.drain")
REQUEST_ID_HEADER = b"x-request-id"
_CLIENT_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")  # a caller's own id is kept when it looks like one


class InFlight:
    """How many requests and sessions are being handled, so that shutdown can wait for the ones it cancelled
    to wind down (and log their line) before the process ends."""

    def __init__(self) -> None:
        self.count = 0

    async def drained(self, within: float) -> bool:
        deadline = time.monotonic() + within
        while self.count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return not self.count


class ShutdownDrain:
    """Around the whole app: the figures of a graceful stop, logged as one line once the app has shut down: the
    requests and WebSocket sessions in flight when the drain began (`begin`, called by the server on SIGTERM),
    how many of them finished within the grace period, how many were still running at its end (and were
    cancelled), and how long they took to be gone. The grace period ends when the server sends the app its
    lifespan shutdown: at once when nothing was left, else after SHUTDOWN_GRACE with the rest cancelled."""

    def __init__(self, app: ASGIApp, grace: float) -> None:
        self.app = app
        self.grace = grace
        self._running: set[object] = set()
        self._at_signal: set[object] = set()
        self._cut: set[object] = set()
        self._began: float | None = None
        self._last_ended = 0.0

    def begin(self) -> None:
        self._began = self._last_ended = time.monotonic()
        self._at_signal = set(self._running)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._noting_grace_end(receive), self._reporting_on_shutdown(send))
            return
        entry = object()
        self._running.add(entry)
        try:
            await self.app(scope, receive, send)
        finally:
            self._running.discard(entry)
            if entry in self._at_signal:
                self._last_ended = time.monotonic()

    def _noting_grace_end(self, receive: Receive) -> Receive:
        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self._cut = self._at_signal & self._running
            return message

        return receiving

    def _reporting_on_shutdown(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"].startswith("lifespan.shutdown") and self._began is not None:
                self._report(self._began)
            await send(message)

        return sending

    def _report(self, began: float) -> None:
        still_running = self._at_signal & self._running  # not wound down even after their cancellation
        ended = time.monotonic() if still_running else self._last_ended
        figures = {
            "in_flight": len(self._at_signal),
            "finished": len(self._at_signal - self._cut),
            "cut": len(self._cut),
            "still_running": len(still_running),
            "drain_seconds": round(ended - began, 3),
            "grace_seconds": self.grace,
        }
        drain_log.info(
            "drained: %(in_flight)d in flight at the signal, %(finished)d finished within the grace period, "
            "%(cut)d cut at its end, %(drain_seconds).2f s",
            figures,
            extra=figures,
        )


class RequestObserver:
    def __init__(self, app: ASGIApp, metrics: Metrics, in_flight: InFlight):
        self.app = app
        self.metrics = metrics
        self.in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        ident = _request_id(scope)
        token = request_id.set(ident)
        context = RequestContext(ident)
        context.attach(scope)
        started = time.perf_counter()
        status: int | None = None
        completed = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, completed
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (REQUEST_ID_HEADER, ident.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                completed = True
            await send(message)

        self.in_flight.count += 1
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Anything no handler answered: logged with its traceback, answered with the envelope (no traceback).
            log.exception("unexpected error in %s %s", scope.get("method", "WEBSOCKET"), scope["path"])
            context.error_type = TTSError.code
            if scope["type"] == "http" and status is None:
                message = f"internal error; request id {ident}"
                await envelope(500, message, TTSError.code)(scope, receive, send_with_id)
        finally:
            self.in_flight.count -= 1
            if scope["type"] == "http":
                self._finish(scope, context, status or 500, completed, time.perf_counter() - started)
            else:
                self.metrics.websocket_sessions.inc()
                log.info("websocket %s closed", scope["path"], extra={"path": scope["path"], "ms": _ms(started)})
            request_id.reset(token)

    def _finish(self, scope: Scope, context: RequestContext, status: int, completed: bool, seconds: float) -> None:
        route = getattr(scope.get("route"), "path", "unmatched")
        speech = context.speech
        # A response is complete when its last byte went out and, for speech, its audio ran to the end.
        completed = completed and (speech is None or speech.finished)
        fields: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"],
            "route": route,
            "status": status,
            "completed": completed,  # false: the client went away before the last byte
            "ms": round(1000 * seconds, 1),
            "request_id": request_id.get(),
        }
        outcome = RequestOutcome(route=route, status=status, error_type=context.error_type)
        if status >= 400 and outcome.error_type is None:
            outcome.error_type = f"http_{status}"
        if speech is not None:
            fields.update(
                model=speech.model,
                voice=context.voice,
                language=",".join(speech.languages),
                format=context.format,
                characters=context.characters,
                frames=speech.frames,
                cache=speech.cache,
                queue_ms=round(1000 * speech.queue_seconds, 1),
                first_audio_ms=None if speech.first_audio is None else round(1000 * speech.first_audio, 1),
                infer_ms=round(1000 * speech.infer_seconds, 1),
                encode_ms=round(1000 * speech.encode_seconds, 1),
                # Until the last byte; for a client that left, until it left.
                total_ms=round(1000 * (speech.total_seconds if completed else seconds), 1),
            )
            outcome.format = context.format or ""
            outcome.model = speech.model
            outcome.first_audio = speech.first_audio
            outcome.queue = speech.queue_seconds
            outcome.encode = speech.encode_seconds
            if completed:
                outcome.total = speech.total_seconds
                outcome.audio_seconds = speech.audio_seconds
            outcome.generated = speech.cache != "hit"
        self.metrics.observe_request(outcome)
        log.info("%s %s %d %.1f ms", scope["method"], scope["path"], status, 1000 * seconds, extra=fields)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER and _CLIENT_ID.fullmatch(value):
            return value.decode()
    return uuid.uuid4().hex


def _ms(started: float) -> float:
    return round(1000 * (time.perf_counter() - started), 1)
