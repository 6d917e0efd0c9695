"""The gateway's ASGI app: its own /health and /ready (never starting the worker), CORS preflights answered and
the API key checked before a worker is started for a request, everything else proxied, and one log line per
proxied request."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from ..http_contract import (
    CORS_EXPOSED_HEADERS,
    CORS_MAX_AGE,
    CORS_METHODS,
    CORS_REQUEST_HEADERS,
    EARLIER_HEALTH_KEYS,
    KEY_HEADERS,
    METRICS_CONTENT_TYPE,
    UNAUTHORIZED_CODE,
    UNAUTHORIZED_MESSAGE,
    error_object,
    is_open_path,
    key_accepted,
)
from ..resources import resident_memory_bytes
from .asgi import (
    CLIENT_CLOSED,
    Message,
    Outcome,
    Receive,
    Scope,
    Send,
    WorkerLost,
    close_with_error,
    send_error,
    send_json,
    send_text,
)
from .settings import GatewaySettings
from .worker import Worker, WorkerUnavailable

if TYPE_CHECKING:
    from .wyoming_relay import WyomingRelay

log = logging.getLogger("qwen3_tts_server.gateway.request")
WS_POLICY_VIOLATION = 1008
# Request headers a browser may send without asking (the Fetch standard's CORS-safelisted ones).
SAFELISTED_HEADERS = ("Accept", "Accept-Language", "Content-Language", "Content-Type")


class Cors:
    """CORS for what the gateway answers itself (preflights, its probes, a refused key, no worker) under the
    policy the worker's middleware applies to what it answers: the same origins, methods and headers."""

    def __init__(self, origins: Sequence[str]) -> None:
        self.origins = frozenset(origins)
        self.any_origin = "*" in self.origins
        self.request_headers = frozenset(name.lower() for name in (*SAFELISTED_HEADERS, *CORS_REQUEST_HEADERS))

    def is_preflight(self, scope: Scope) -> bool:
        return (
            bool(self.origins)
            and scope["method"] == "OPTIONS"
            and _header(scope, b"origin") is not None
            and _header(scope, b"access-control-request-method") is not None
        )

    async def preflight(self, scope: Scope, send: Send) -> None:
        """200 with what the page may do, or 400 naming what it may not (without Access-Control-Allow-Origin)."""
        origin = _header(scope, b"origin") or ""
        requested = (_header(scope, b"access-control-request-headers") or "").split(",")
        headers = [
            ("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
            ("Access-Control-Allow-Methods", ", ".join(CORS_METHODS)),
            ("Access-Control-Allow-Headers", ", ".join(sorted({*SAFELISTED_HEADERS, *CORS_REQUEST_HEADERS}))),
            ("Access-Control-Max-Age", str(CORS_MAX_AGE)),
        ]
        refused = []
        if self._allowed(origin):
            headers.append(("Access-Control-Allow-Origin", "*" if self.any_origin else origin))
        else:
            refused.append("origin")
        if _header(scope, b"access-control-request-method") not in CORS_METHODS:
            refused.append("method")
        if any(name.strip().lower() not in self.request_headers for name in requested if name.strip()):
            refused.append("headers")
        status, text = (400, "Disallowed CORS " + ", ".join(refused)) if refused else (200, "OK")
        await send_text(_adding(send, headers), status, text, "text/plain; charset=utf-8")

    def answering(self, scope: Scope, send: Send) -> Send:
        """`send` for a response the gateway makes itself: with the headers a page on an allowed origin needs."""
        origin = _header(scope, b"origin")
        if not self.origins or origin is None:
            return send
        headers = [("Vary", "Origin"), ("Access-Control-Expose-Headers", ", ".join(CORS_EXPOSED_HEADERS))]
        if self._allowed(origin):
            headers.append(("Access-Control-Allow-Origin", "*" if self.any_origin else origin))
        return _adding(send, headers)

    def _allowed(self, origin: str) -> bool:
        return self.any_origin or origin in self.origins


class GatewayApp:
    def __init__(self, settings: GatewaySettings, worker: Worker) -> None:
        self.settings = settings
        self.worker = worker
        self.cors = Cors(settings.cors_origins)
        self.wyoming: WyomingRelay | None = None  # the Wyoming port, while it is served

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] != "http":
            return
        elif self.cors.is_preflight(scope):  # browsers send no key with one: answered before the key check
            await self.cors.preflight(scope, send)
        elif scope["path"] == "/health":
            await send_json(self.cors.answering(scope, send), 200, await self._health())
        elif scope["path"] == "/ready":
            await send_json(self.cors.answering(scope, send), 200, {"ready": True, "worker": self.worker.state})
        elif scope["path"] == "/metrics":
            await send_text(self.cors.answering(scope, send), 200, await self._metrics(), METRICS_CONTENT_TYPE)
        else:
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        idle_stopper: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                idle_stopper = asyncio.create_task(self.worker.stop_when_idle())
                if self.settings.wyoming_port is not None:
                    from .wyoming_relay import WyomingRelay

                    self.wyoming = WyomingRelay(self.settings, self.worker)
                    await self.wyoming.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if idle_stopper is not None:
                    idle_stopper.cancel()
                if self.wyoming is not None:
                    await self.wyoming.close()
                await self.worker.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _health(self) -> dict:
        """The gateway's report and its worker's, with the earlier server's flat keys first: the worker's while it
        runs; before it starts, the model is not loaded and nothing waits."""
        worker = self.worker
        worker_health = await worker.health()
        if worker_health is not None:
            flat = {key: worker_health[key] for key in EARLIER_HEALTH_KEYS if key in worker_health}
        else:
            flat = {"model_loaded": False, "model_id": None, "queue_depth": 0}
            flat["max_queue_depth"] = self.settings.max_queue_depth
        return {
            "status": "ok",
            **flat,
            "gateway": {
                "pid": os.getpid(),
                "rss_bytes": resident_memory_bytes(),
                "worker": worker.state,
                "worker_pid": worker.pid,
                "starts": worker.starts,
                "restarts": worker.restarts,
                "in_flight": worker.in_flight,
            },
            "worker": worker_health,
        }

    async def _metrics(self) -> str:
        """The worker's metrics while it runs, and the gateway's own: a scrape neither starts the worker nor keeps
        it from its idle stop."""
        worker = self.worker
        own = [
            ("qwen3_tts_gateway_worker_up", "gauge", "1 while the gateway's worker runs", worker.state == "running"),
            ("qwen3_tts_gateway_worker_starts_total", "counter", "Workers started", worker.starts),
            ("qwen3_tts_gateway_worker_restarts_total", "counter", "Workers started after a crash", worker.restarts),
            ("qwen3_tts_gateway_resident_memory_bytes", "gauge", "The gateway's RSS", resident_memory_bytes() or 0),
        ]
        lines = [
            f"# HELP {name} {text}\n# TYPE {name} {kind}\n{name} {float(value)}\n" for name, kind, text, value in own
        ]
        return (await worker.metrics() or "") + "".join(lines)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        outcome = Outcome(CLIENT_CLOSED)
        reply = self.cors.answering(scope, send)  # the worker's own middleware adds them to what it answers
        try:
            given = [_header(scope, name.encode()) for name in ("authorization", *KEY_HEADERS)]
            if not is_open_path(scope["path"]) and not key_accepted(self.settings.accepted_keys, *given):
                outcome.status = 401
                await send_error(reply, 401, UNAUTHORIZED_MESSAGE, UNAUTHORIZED_CODE)
                return
            from .proxy import proxy_http  # loaded with the first proxied request: an idle gateway stays small

            try:
                async with self.worker.lease() as upstream:
                    await proxy_http(scope, receive, send, upstream.client, outcome, self.settings.body_timeout)
            except WorkerUnavailable as exc:
                outcome.status = 503
                await send_error(reply, 503, str(exc), "worker_unavailable")
        except WorkerLost:
            outcome.status = 502
            raise
        finally:
            self._log(scope["method"], scope, outcome, started)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        if (await receive())["type"] != "websocket.connect":
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        authorization, query_key = _header(scope, b"authorization"), query.get("api_key", [None])[0]
        others = [_header(scope, name.encode()) for name in KEY_HEADERS]
        if not key_accepted(self.settings.accepted_keys, authorization, *others, query_key):
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION, "reason": "missing or wrong API key"})
            self._log("WEBSOCKET", scope, Outcome(WS_POLICY_VIOLATION), started)
            return
        from .proxy import proxy_websocket

        code = 1006
        try:
            async with self.worker.lease() as upstream:
                code = await proxy_websocket(scope, receive, send, upstream.ws_base)
        except WorkerUnavailable as exc:
            await send({"type": "websocket.accept"})
            code = await close_with_error(send, error_object(503, str(exc), "worker_unavailable"))
        finally:
            self._log("WEBSOCKET", scope, Outcome(code), started)

    def _log(self, method: str, scope: Scope, outcome: Outcome, started: float) -> None:
        fields = {
            "method": method,
            "path": scope["path"],
            "status": outcome.status,
            "ms": round(1000 * (time.perf_counter() - started), 1),
            "request_id": outcome.request_id,
        }
        log.info("request", extra={"fields": fields})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _adding(send: Send, headers: list[tuple[str, str]]) -> Send:
    """`send` with `headers` added to the response's start."""
    encoded = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *encoded]}
        await send(message)

    return sending
