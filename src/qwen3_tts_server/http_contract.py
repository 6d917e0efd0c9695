"""What the server and the gateway both answer over HTTP: which paths need no API key, how a key is checked,
OpenAI's error object and the metrics content type. Standard library only: the gateway imports it too."""

from __future__ import annotations

import hmac

OPEN_PATHS = frozenset({"/health", "/ready", "/metrics"})  # probes and scrapers come without keys
UNAUTHORIZED_MESSAGE = "missing or wrong API key (Authorization: Bearer ...)"
UNAUTHORIZED_CODE = "invalid_api_key"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus' text format 0.0.4


def key_accepted(api_key: str | None, authorization: str | None, query_key: str | None = None) -> bool:
    """True when no key is configured, or the `Authorization: Bearer` header or `query_key` (`?api_key=`, for
    browsers, which cannot set WebSocket headers) carries it; compared in constant time."""
    if not api_key:
        return True
    expected = api_key.encode()
    given = ((authorization or "").removeprefix("Bearer "), query_key or "")
    return any(hmac.compare_digest(candidate.encode(), expected) for candidate in given)


def error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    return "invalid_request_error" if status < 500 else "server_error"


def error_object(status: int, message: str, code: str | None = None, param: str | None = None) -> dict:
    """OpenAI's error object: message, type (from the status), param and code, all four always present."""
    return {"message": message, "type": error_type(status), "param": param, "code": code}
