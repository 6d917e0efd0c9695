"""The optional API key: `Authorization: Bearer <key>` on every route but the probes (/health, /ready),
compared in constant time."""

from __future__ import annotations

import hmac

OPEN_PATHS = {"/health", "/ready", "/metrics"}  # probes and scrapers come without keys


def bearer_matches(authorization: str | None, api_key: str | None) -> bool:
    """True when no key is configured or the `Authorization` header carries it."""
    if not api_key:
        return True
    given = (authorization or "").removeprefix("Bearer ").encode()
    return hmac.compare_digest(given, api_key.encode())
