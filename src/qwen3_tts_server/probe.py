"""The container health probe: GET /ready on the server that runs beside it (Docker's HEALTHCHECK runs
`qwen3-tts-server healthcheck` inside the container). Only httpx and the standard library, no torch or FastAPI: a
probe starts every 30 seconds and has to be quick and small."""

from __future__ import annotations

import json
import os

import httpx

from .gateway.listen import WILDCARD_HOSTS

READY_PATH = "/ready"


def ready_url(host: str, port: int, tls: bool = False) -> str:
    """The /ready URL of a server listening on host:port, a wildcard address probed on the loopback of its family."""
    host = WILDCARD_HOSTS.get(host.strip(), host.strip())
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{port}{READY_PATH}"


def check_ready(
    host: str,
    port: int,
    unix_socket_path: str | os.PathLike[str] | None,
    timeout: float = 5.0,
    tls: bool = False,
) -> tuple[bool, str]:
    """GET /ready over `unix_socket_path` when it is set, else over host:port, over HTTPS with `tls` (a server
    given SSL_KEYFILE and SSL_CERTFILE). Returns (ok, a one-line reason): ok when the server answers 200 (a server
    whose model is not loaded yet answers 200 too: it loads it on demand; it answers 503 when loading the model
    failed).

    The certificate is not verified: the probe reaches its own machine's server (the loopback, the bound address
    or the socket), sends no key and reads only readiness, while a certificate seldom names 127.0.0.1 nor comes
    from a CA installed beside the probe (a self-signed one)."""
    scheme = "https" if tls else "http"
    if unix_socket_path:
        where = f"unix:{os.fspath(unix_socket_path)}"
        transport = httpx.HTTPTransport(uds=os.fspath(unix_socket_path), verify=False)
        url = f"{scheme}://localhost{READY_PATH}"
    elif not port:
        return False, "PORT=0: the server's port is picked when it starts, so there is no address to probe"
    else:
        url = where = ready_url(host, port, tls)
        transport = httpx.HTTPTransport(verify=False)
    try:
        # trust_env=False: HTTP(S)_PROXY set for the container must not send the probe elsewhere.
        with httpx.Client(transport=transport, timeout=timeout, trust_env=False) as client:
            response = client.get(url)
    except httpx.TimeoutException:
        return False, f"{where}: no answer within {timeout:g} s"
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return False, f"{where}: {type(exc).__name__}: {_one_line(str(exc)) or 'request failed'}"
    shown = _describe(response)
    if response.status_code == 200:
        return True, f"{where}: ready ({shown})"
    return False, f"{where}: HTTP {response.status_code} ({shown})"


def _describe(response: httpx.Response) -> str:
    """A short description of a /ready body ({"ready": ..., "model": "<state>"}; the gateway's has "worker")."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("model", "worker"):
            if isinstance(body.get(key), str):
                return f"{key} {_one_line(body[key])[:40]}"
    return _one_line(response.text)[:120] or "empty body"


def _one_line(text: str) -> str:
    return " ".join(text.split())
