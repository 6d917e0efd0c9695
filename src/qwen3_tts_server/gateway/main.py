"""`qwen3-tts-server gateway [serve's flags]`: settings from the command line, then the gateway until SIGTERM
(in-flight requests get SHUTDOWN_GRACE s, then the worker is stopped and the exit status is 0)."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys

import uvicorn
from setproctitle import setproctitle

from .app import GatewayApp
from .listen import uvicorn_options
from .logs import configure_logging
from .settings import GatewaySettings, SettingsError, load_settings
from .worker import Worker

PROCESS_TITLE = "qwen3-tts-server gateway"
log = logging.getLogger("qwen3_tts_server.gateway")


def main(argv: list[str]) -> int:
    if any(flag in argv for flag in ("-h", "--help")):
        print("usage: qwen3-tts-server gateway [the flags of `qwen3-tts-server serve`]", file=sys.stderr)
        return 0
    try:
        settings, warnings = load_settings(argv)
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2
    setproctitle(PROCESS_TITLE)
    configure_logging(settings.log_format, settings.log_level)
    for warning in warnings:
        log.warning(warning)
    app = GatewayApp(settings, Worker(settings, argv))
    config = uvicorn_config(settings, app)
    # uvicorn re-raises a SIGTERM/SIGINT it handled once it has shut down; these handlers absorb it so that a
    # graceful stop exits 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    asyncio.run(GatewayServer(config, app).serve())
    return 0


class GatewayServer(uvicorn.Server):
    """uvicorn's server, closing the gateway's Wyoming port too when the graceful stop begins."""

    def __init__(self, config: uvicorn.Config, app: GatewayApp) -> None:
        super().__init__(config)
        self.gateway = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.gateway.wyoming is not None:
            self.gateway.wyoming.stop_accepting()
        await super().shutdown(sockets)


def uvicorn_config(settings: GatewaySettings, app: GatewayApp) -> uvicorn.Config:
    """The public listener (HTTPS with TLS files; the worker behind it stays plain HTTP on the loopback)."""
    return uvicorn.Config(
        app,
        lifespan="on",
        http="auto",  # httptools when installed
        ws="websockets-sansio",
        log_config=None,
        server_header=False,  # the worker's own headers pass through
        date_header=False,
        **uvicorn_options(settings),
    )
