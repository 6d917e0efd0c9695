"""HTTP access to one running worker: a pooled httpx client, its readiness and its /health. Imported only once a
worker is started, so that an idle gateway does not hold an HTTP client library in memory."""

from __future__ import annotations

import http.cookiejar

import httpx


class Upstream:
    def __init__(self, host: str, port: int, wyoming_port: int | None = None) -> None:
        self.host = host
        self.wyoming_port = wyoming_port  # the worker's own Wyoming port, when the gateway serves one
        url_host = f"[{host}]" if ":" in host else host
        self.ws_base = f"ws://{url_host}:{port}"
        self.client = httpx.AsyncClient(
            base_url=f"http://{url_host}:{port}",
            cookies=_NoCookieJar(),
            timeout=httpx.Timeout(None, connect=10.0),  # the worker bounds a request's time itself
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )

    async def ready(self) -> bool:
        try:
            return (await self.client.get("/ready", timeout=5)).status_code == 200
        except httpx.TransportError:
            return False

    async def health(self) -> dict | None:
        try:
            return (await self.client.get("/health", timeout=5)).json()
        except (httpx.HTTPError, ValueError):
            return None

    async def metrics(self) -> str | None:
        try:
            response = await self.client.get("/metrics", timeout=5)
        except httpx.HTTPError:
            return None
        return response.text if response.status_code == 200 else None

    async def aclose(self) -> None:
        await self.client.aclose()


class _NoCookieJar(http.cookiejar.CookieJar):
    """The client is shared by every caller: a cookie set for one must not be replayed for the others
    (Set-Cookie and Cookie still pass through as headers)."""

    def extract_cookies(self, response, request) -> None:
        pass

    def set_cookie(self, cookie) -> None:
        pass
