"""`qwen3-tts-server gateway [serve's flags]`: settings from the command line, then the gateway until SIGTERM
(in-flight requests get SHUTDOWN_GRACE s, then the worker is stopped and the exit status is 0)."""

from __future__ import annotations

import asyncio
import math
import signal
import sys

import uvicorn
from setproctitle import setproctitle

from .app import GatewayApp
from .logs import configure_logging
from .settings import SettingsError, load_settings
from .worker import Worker

PROCESS_TITLE = "qwen3-tts-server gateway"


def main(argv: list[str]) -> int:
    if any(flag in argv for flag in ("-h", "--help")):
        print("usage: qwen3-tts-server gateway [the flags of `qwen3-tts-server serve`]", file=sys.stderr)
        return 0
    try:
        settings = load_settings(argv)
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2
    setproctitle(PROCESS_TITLE)
    configure_logging(settings.log_format, settings.log_level)
    worker = Worker(settings, argv)
    config = uvicorn.Config(
        GatewayApp(settings, worker),
        host=settings.host,
        port=settings.port,
        uds=settings.unix_socket_path,
        lifespan="on",
        http="auto",  # httptools when installed
        ws="websockets-sansio",
        log_config=None,
        access_log=False,  # the app logs each proxied request itself
        server_header=False,  # the worker's own headers pass through
        date_header=False,
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
    )
    # uvicorn re-raises a SIGTERM/SIGINT it handled once it has shut down; these handlers absorb it so that a
    # graceful stop exits 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    asyncio.run(uvicorn.Server(config).serve())
    return 0
