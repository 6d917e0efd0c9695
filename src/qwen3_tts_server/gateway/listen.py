"""How a public server listens, as uvicorn options: its address, TLS, keep-alive and graceful drain. Shared by
`serve` and the gateway; it lives here because the gateway may import nothing heavier."""

from __future__ import annotations

import math
import os
from typing import Any, Protocol

# The addresses that mean every interface, each with the loopback of its family (a mapping: it binds nothing).
WILDCARD_HOSTS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}  # nosec B104


class ListenSettings(Protocol):
    """What both `Settings` and the gateway's `GatewaySettings` have."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def unix_socket_path(self) -> str | os.PathLike[str] | None: ...
    @property
    def ssl_keyfile(self) -> str | os.PathLike[str] | None: ...
    @property
    def ssl_certfile(self) -> str | os.PathLike[str] | None: ...
    @property
    def timeout_keep_alive(self) -> float: ...
    @property
    def shutdown_grace(self) -> float: ...


def uvicorn_options(settings: ListenSettings) -> dict[str, Any]:
    """uvicorn.Config's keyword arguments for listening: HTTPS when both TLS files are set (the settings refuse
    one alone), idle keep-alive connections kept TIMEOUT_KEEP_ALIVE s (65 by default: longer than the 60 s idle
    timeout of common load balancers, so that the server never closes a connection a balancer is about to
    reuse), and SHUTDOWN_GRACE s for in-flight requests on SIGTERM."""
    uds = settings.unix_socket_path
    return {
        "host": settings.host,
        "port": settings.port,
        "uds": os.fspath(uds) if uds else None,
        "ssl_keyfile": settings.ssl_keyfile,
        "ssl_certfile": settings.ssl_certfile,
        "timeout_keep_alive": settings.timeout_keep_alive,
        "timeout_graceful_shutdown": math.ceil(settings.shutdown_grace),
        "access_log": False,  # the app logs each request itself, with more than uvicorn's line
    }
