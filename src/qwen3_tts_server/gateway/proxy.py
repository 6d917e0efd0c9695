"""Forwarding to the worker without buffering: HTTP bodies streamed both ways chunk by chunk as they come,
and WebSocket frames pumped both ways. A worker lost mid-response is reported the way each kind of response
allows."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from ..http_contract import BodyDeadline, error_object
from .asgi import CLIENT_CLOSED, Outcome, Receive, Scope, Send, WorkerLost, close_with_error, send_error

HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer", b"upgrade"}
    | {b"transfer-encoding"}  # the body is re-framed on each hop
)
NOT_FORWARDED_UP = HOP_BY_HOP | {b"host", b"expect", b"x-forwarded-for"}  # 100-continue is answered here
WS_HEADERS_UP = (b"authorization", b"x-request-id")
ABNORMAL_CLOSE = (None, 1006)


class ClientGone(Exception):
    """The client disconnected while its request body was being forwarded."""


class BodyTimedOut(Exception):
    """The client took longer than BODY_TIMEOUT to send its request body."""


def _forwarded_for(scope: Scope) -> list[tuple[bytes, bytes]]:
    """X-Forwarded-For with the client's address appended, so that the worker can log who called."""
    chain = [value for name, value in scope["headers"] if name.lower() == b"x-forwarded-for"]
    if scope.get("client"):
        chain.append(scope["client"][0].encode())
    return [(b"x-forwarded-for", b", ".join(chain))] if chain else []


def _target(scope: Scope) -> str:
    path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def proxy_http(
    scope: Scope, receive: Receive, send: Send, client: httpx.AsyncClient, outcome: Outcome, body_timeout: float
) -> None:
    """Forward one request; `outcome` is filled in as it goes (the status stays CLIENT_CLOSED if the client
    leaves first). A body not sent within `body_timeout` seconds is a 408 here: the worker's own limit would
    answer only once the gateway sent it more. Raises WorkerLost if the worker goes away in the middle of a
    non-SSE body."""
    headers = [(name, value) for name, value in scope["headers"] if name.lower() not in NOT_FORWARDED_UP]
    headers += _forwarded_for(scope)
    has_body = any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in scope["headers"])
    body_done = asyncio.Event()

    async def body():
        deadline = BodyDeadline(body_timeout)
        while True:
            try:
                message = await deadline.read(receive)
            except asyncio.TimeoutError:
                raise BodyTimedOut from None
            if message["type"] == "http.disconnect":
                raise ClientGone
            yield message.get("body", b"")
            if not message.get("more_body", False):
                break
        body_done.set()

    if not has_body:
        body_done.set()
    content = body() if has_body else None
    request = client.build_request(scope["method"], _target(scope), headers=headers, content=content)
    try:
        response = await client.send(request, stream=True)
    except ClientGone:
        return
    except BodyTimedOut:
        outcome.status = 408
        await send_error(send, 408, f"the request body took longer than {body_timeout:g} s", "request_timeout")
        return
    except httpx.ConnectError as exc:
        outcome.status = 502
        await send_error(send, 502, f"the worker did not answer: {exc or type(exc).__name__}", "worker_unavailable")
        return
    except httpx.HTTPError as exc:  # it took the request and went away before its response began
        outcome.status = 502
        message = f"the worker went away before answering: {exc or type(exc).__name__}"
        await send_error(send, 502, message, "worker_lost")
        return
    try:
        outcome.status, outcome.request_id = response.status_code, response.headers.get("x-request-id")
        down = [(name.lower(), value) for name, value in response.headers.raw if name.lower() not in HOP_BY_HOP]
        await send({"type": "http.response.start", "status": response.status_code, "headers": down})
        sse = response.headers.get("content-type", "").startswith("text/event-stream")
        forward = asyncio.ensure_future(_forward_body(response, send, sse))
        disconnect = asyncio.ensure_future(_until_disconnect(receive, body_done))
        try:
            await asyncio.wait((forward, disconnect), return_when=asyncio.FIRST_COMPLETED)
        finally:
            disconnect.cancel()
            if not forward.done():  # the client went away: closing the response tells the worker to stop too
                forward.cancel()
                outcome.status = CLIENT_CLOSED
        with contextlib.suppress(asyncio.CancelledError):
            await forward  # raises WorkerLost
    finally:
        await response.aclose()


async def _forward_body(response: httpx.Response, send: Send, sse: bool) -> None:
    try:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except (httpx.HTTPError, httpx.StreamError) as exc:
        if not sse:
            raise WorkerLost(f"the worker went away mid-response: {exc}") from exc
        event = {"type": "error", "error": _worker_lost_error()}
        await send({"type": "http.response.body", "body": f"data: {json.dumps(event)}\n\n".encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_disconnect(receive: Receive, body_done: asyncio.Event) -> None:
    await body_done.wait()
    while (await receive())["type"] != "http.disconnect":
        pass


def _worker_lost_error() -> dict:
    return error_object(502, "the worker went away before the response was complete", "worker_lost")


async def proxy_websocket(scope: Scope, receive: Receive, send: Send, ws_base: str) -> int:
    """Pump frames until either side closes; returns the close code sent to the client (or received from
    it). The client's handshake is answered once the worker's is, with the worker's subprotocol."""
    forwarded = [(name, value) for name, value in scope["headers"] if name in WS_HEADERS_UP] + _forwarded_for(scope)
    headers = [(name.decode(), value.decode("latin-1")) for name, value in forwarded]
    try:
        upstream = await connect(
            ws_base + _target(scope),
            additional_headers=headers,
            subprotocols=scope.get("subprotocols") or None,
            compression=None,  # loopback: deflating audio only costs CPU
            max_size=None,  # the worker enforces its own limits
            ping_interval=None,
            open_timeout=30,
        )
    except InvalidStatus:  # refused by the worker (unknown path...): refuse the client too
        await send({"type": "websocket.close", "code": 1008})
        return 1008
    except (OSError, asyncio.TimeoutError, WebSocketException):
        await send({"type": "websocket.accept"})
        return await close_with_error(send, _worker_lost_error())
    async with upstream:
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        up = asyncio.ensure_future(_client_to_worker(receive, upstream))
        down = asyncio.ensure_future(_worker_to_client(upstream, send))
        try:
            await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
            results = await asyncio.gather(up, down, return_exceptions=True)
        client_code = results[0]
        if isinstance(client_code, int):  # the client closed: so does the worker's side
            await upstream.close(client_code if _sendable(client_code) else 1000)
            return client_code
        if isinstance(results[1], BaseException) and not isinstance(results[1], asyncio.CancelledError):
            return 1006  # the client's connection failed while sending to it
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(upstream.wait_closed(), 5)
        return await _close_like_worker(send, upstream)


async def _client_to_worker(receive: Receive, upstream: ClientConnection) -> int:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return message.get("code", 1000)
        text = message.get("text")
        await upstream.send(text if text is not None else message.get("bytes") or b"")


async def _worker_to_client(upstream: ClientConnection, send: Send) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for data in upstream:
            kind = "text" if isinstance(data, str) else "bytes"
            await send({"type": "websocket.send", kind: data})


async def _close_like_worker(send: Send, upstream: ClientConnection) -> int:
    code = upstream.close_code
    if code in ABNORMAL_CLOSE:
        return await close_with_error(send, _worker_lost_error())
    code = 1000 if code == 1005 else code
    with contextlib.suppress(Exception):
        await send({"type": "websocket.close", "code": code, "reason": upstream.close_reason or ""})
    return code


def _sendable(code: int) -> bool:
    """A close code that may go in a close frame (RFC 6455 7.4)."""
    return 1000 <= code <= 1014 and code not in (1004, 1005, 1006) or 3000 <= code < 5000
