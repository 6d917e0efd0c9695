"""`qwen3-tts-server serve`: the full server in this process, from the settings to a running uvicorn.

SIGTERM (or Ctrl-C) drains: the listening socket closes at once, in-flight requests and streams get
SHUTDOWN_GRACE seconds to finish, what is left is then cancelled (its engine rows freed), the engine stops,
the last log lines are flushed and the exit status is 0."""

from __future__ import annotations

import logging
import math
import signal

from .config import Settings

log = logging.getLogger(__name__)


def serve(settings: Settings) -> int:
    import uvicorn

    from .api.app import create_app
    from .engine.model_manager import ModelManager
    from .logs import configure_logging
    from .model.checkpoint import resolve_checkpoint
    from .model.tts_model import Qwen3TTSModel

    log_config = configure_logging(settings.log_format, settings.log_level)
    _set_process_title(f"qwen3-tts-server serve {settings.model_id}")
    resolve_checkpoint(settings.model_id)  # fail before binding a port if the checkpoint cannot be found
    device = settings.resolved_device()
    dtype = settings.resolved_dtype(device)
    models = ModelManager(
        lambda: Qwen3TTSModel.load(settings.model_id, device=device, dtype=dtype), idle_timeout=settings.idle_timeout
    )
    app = create_app(settings, models)
    # uvicorn re-raises the SIGTERM / SIGINT it drained for once it has shut down; absorbed here, so that a
    # graceful stop exits 0 (as the gateway's does).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    where = settings.unix_socket_path or f"{settings.host}:{settings.port}"
    log.info("serving %s on %s (%s, %s)", settings.model_id, where, device, dtype)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        uds=str(settings.unix_socket_path) if settings.unix_socket_path else None,
        log_config=log_config,
        access_log=False,  # api/observability.py logs every request, with its latency breakdown
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
    )
    logging.shutdown()
    return 0


def _set_process_title(title: str) -> None:
    import setproctitle

    setproctitle.setproctitle(title)
