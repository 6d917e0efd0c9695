"""The gateway's ASGI app: its own /health and /ready (never starting the worker), the API key checked before
a worker is started for a request, everything else proxied, and one log line per proxied request."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from urllib.parse import parse_qs

from ..http_contract import METRICS_CONTENT_TYPE, UNAUTHORIZED_CODE, UNAUTHORIZED_MESSAGE, error_object, key_accepted
from ..resources import resident_memory_bytes
from .asgi import (
    CLIENT_CLOSED,
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

log = logging.getLogger("qwen3_tts_server.gateway.request")
WS_POLICY_VIOLATION = 1008


class GatewayApp:
    def __init__(self, settings: GatewaySettings, worker: Worker) -> None:
        self.settings = settings
        self.worker = worker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["path"] == "/health" and scope["type"] == "http":
            await send_json(send, 200, await self._health())
        elif scope["path"] == "/ready" and scope["type"] == "http":
            await send_json(send, 200, {"ready": True, "worker": self.worker.state})
        elif scope["path"] == "/metrics" and scope["type"] == "http":
            await send_text(send, 200, await self._metrics(), METRICS_CONTENT_TYPE)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        idle_stopper: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                idle_stopper = asyncio.create_task(self.worker.stop_when_idle())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if idle_stopper is not None:
                    idle_stopper.cancel()
                await self.worker.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _health(self) -> dict:
        worker = self.worker
        return {
            "status": "ok",
            "gateway": {
                "pid": os.getpid(),
                "rss_bytes": resident_memory_bytes(),
                "worker": worker.state,
                "worker_pid": worker.pid,
                "starts": worker.starts,
                "restarts": worker.restarts,
                "in_flight": worker.in_flight,
            },
            "worker": await worker.health(),
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
        try:
            if not key_accepted(self.settings.api_key, _header(scope, b"authorization")):
                outcome.status = 401
                await send_error(send, 401, UNAUTHORIZED_MESSAGE, UNAUTHORIZED_CODE)
                return
            from .proxy import proxy_http  # loaded with the first proxied request: an idle gateway stays small

            try:
                async with self.worker.lease() as upstream:
                    await proxy_http(scope, receive, send, upstream.client, outcome)
            except WorkerUnavailable as exc:
                outcome.status = 503
                await send_error(send, 503, str(exc), "worker_unavailable")
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
        if not key_accepted(self.settings.api_key, _header(scope, b"authorization"), query.get("api_key", [None])[0]):
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
