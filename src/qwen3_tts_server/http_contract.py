"""What the server and the gateway both answer over HTTP: which paths need no API key, how a key is checked, what
CORS allows, OpenAI's error object and the metrics content type. Standard library only: the gateway imports it too."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus
from typing import TypeVar

OPEN_PATHS = frozenset({"/health", "/ready", "/metrics"})  # probes and scrapers come without keys
# The playground's page and files: a browser loads them without a key, then sends the key it is given.
PLAYGROUND_PATHS = frozenset({"/", "/playground"})
PLAYGROUND_FILES = "/playground/"

UNAUTHORIZED_MESSAGE = "missing or wrong API key (Authorization: Bearer ...)"
UNAUTHORIZED_CODE = "invalid_api_key"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus' text format 0.0.4
# The earlier server's /health keys, flat (service/health.py fills them; the gateway relays its worker's).
EARLIER_HEALTH_KEYS = (
    "model_loaded",
    "model_id",
    "cuda",
    "queue_depth",
    "max_queue_depth",
    "voices",
    "audio_cache_size",
    "audio_cache_max",
    "voice_cache_size",
    "voice_cache_max",
    "voice_cache_hits",
    "gpu_name",
    "gpu_allocated_mb",
    "gpu_reserved_mb",
)


def is_open_path(path: str) -> bool:
    """Served without an API key: the probes, the scrape and the playground's page (not the API it calls)."""
    return path in OPEN_PATHS or path in PLAYGROUND_PATHS or path.startswith(PLAYGROUND_FILES)


# CORS (CORS_ORIGINS): what a browser page on an allowed origin may send, and which response headers it may read.
CORS_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
CORS_REQUEST_HEADERS = ("Authorization", "Content-Type", "X-Request-Id", "xi-api-key", "X-API-Key", "Cartesia-Version")
CORS_EXPOSED_HEADERS = (
    "X-Request-Id",
    "Retry-After",
    "X-Language",
    "X-Model",
    "X-Segments",
    "X-Segments-Cut",
    "X-Cache",
    "X-Spoken-Text",
    "X-Audio-Frames",
    "X-Latency-Queue-Ms",
    "X-Latency-First-Audio-Ms",
    "X-Latency-Infer-Ms",
    "X-Latency-Encode-Ms",
    "X-Latency-Total-Ms",
    "X-PCM-Sample-Rate",
    "X-PCM-Bit-Depth",
    "X-PCM-Channels",
)
CORS_MAX_AGE = 600  # seconds a browser may keep a preflight's answer


AUTHORIZATION_SCHEMES = ("Bearer", "Token")  # OpenAI's and most clients'; Deepgram's
KEY_HEADERS = ("xi-api-key", "x-api-key")  # the key alone in a header of its own: ElevenLabs' clients', Cartesia's


def key_accepted(accepted_keys: Sequence[str], authorization: str | None, *other_keys: str | None) -> bool:
    """True when no key is configured, or the `Authorization` header (`Bearer <key>`, or Deepgram's `Token <key>`) or
    one of `other_keys` (the KEY_HEADERS: ElevenLabs' `xi-api-key`, Cartesia's `X-API-Key`; `?api_key=`, for
    browsers, which cannot set WebSocket headers) carries one of `accepted_keys`. Each key is compared in constant
    time, and every one of them, so the time taken does not tell which key matched."""
    if isinstance(accepted_keys, str):  # a lone key would be taken as its characters, each one a key
        raise TypeError("accepted_keys is a list of keys, not one key")
    keys = [key.encode() for key in accepted_keys if key]
    if not keys:
        return True
    scheme, _, credential = (authorization or "").partition(" ")
    bearer = credential if scheme in AUTHORIZATION_SCHEMES else authorization or ""
    given = [bearer.encode(), *((key or "").encode() for key in other_keys)]
    matched = False
    for key in keys:
        for candidate in given:
            matched |= hmac.compare_digest(candidate, key)
    return matched


Message = TypeVar("Message")  # an ASGI message, as each side types it


class BodyDeadline:
    """BODY_TIMEOUT: the whole request body within `seconds` of its first read. `read(receive)` is the next
    message, raising TimeoutError once the time is up (the server's limits and the gateway's proxy both time bodies
    with it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._deadline: float | None = None

    async def read(self, receive: Callable[[], Awaitable[Message]]) -> Message:
        loop = asyncio.get_running_loop()
        if self._deadline is None:
            self._deadline = loop.time() + self.seconds
        return await asyncio.wait_for(receive(), self._deadline - loop.time())


def error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    return "invalid_request_error" if status < 500 else "server_error"


def error_object(status: int, message: str, code: str | None = None, param: str | None = None) -> dict:
    """OpenAI's error object: message, type (from the status), param and code, all four always present."""
    return {"message": message, "type": error_type(status), "param": param, "code": code}


def error_document(
    status: int,
    message: str,
    code: str | None = None,
    param: str | None = None,
    flat_code: str | None = None,
    context: dict | None = None,
) -> dict:
    """An error response's body: OpenAI's `{"error": {...}}` (what the SDKs read) with the earlier server's flat
    keys beside it (what its clients read): `code` in its style (QUEUE_FULL, UNKNOWN_VOICE...; by default ours in
    capitals, or the status's name), `message`, `statusCode` and `context` (null when there is none)."""
    if flat_code is None:
        flat_code = code.upper() if code else HTTPStatus(status).name
    return {
        "error": error_object(status, message, code, param),
        "code": flat_code,
        "message": message,
        "statusCode": status,
        "context": context,
    }
