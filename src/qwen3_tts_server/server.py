"""`qwen3-tts-server serve`: the full server in this process, from the settings to a running uvicorn.

SIGTERM (or Ctrl-C) drains: the listening socket closes at once, in-flight requests and streams get
SHUTDOWN_GRACE seconds to finish, what is left is then cancelled (its engine rows freed), the engine stops,
one line sums the drain up (in flight at the signal, finished, cut, seconds), the last log lines are flushed
and the exit status is 0."""

from __future__ import annotations

import logging
import os
import signal
import socket

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from .api.observability import ShutdownDrain
from .config import Settings, unsupported_variable_warnings
from .gateway.listen import uvicorn_options

log = logging.getLogger(__name__)


def serve(settings: Settings) -> int:
    from .api.app import create_app
    from .engine.model_manager import ModelManager
    from .logs import configure_logging
    from .model.checkpoint import resolve_checkpoint
    from .model.loading import parse_device, prepare_loading
    from .model.quantization import parse_quantization
    from .model.tts_model import Qwen3TTSModel
    from .service.voice_library import default_data_dir

    log_config = configure_logging(settings.log_format, settings.log_level)
    _set_process_title(f"qwen3-tts-server serve {settings.model_id}")
    for warning in unsupported_variable_warnings():
        log.warning(warning)
    resolve_checkpoint(settings.model_id)  # fail before binding a port if the checkpoint cannot be found
    device = settings.resolved_device()
    dtype = settings.resolved_dtype(device)
    parse_quantization(settings.quantize, parse_device(device))  # fp8 without CUDA fails here, before binding
    compile_step = settings.resolved_compile()
    if compile_step:  # inductor's compiled code kept beside the voice library, so that a restart reuses it
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str((settings.data_dir or default_data_dir()) / "compiled"))
    models = ModelManager(
        lambda: Qwen3TTSModel.load(
            settings.model_id, device=device, dtype=dtype, quantize=settings.quantize, compile=compile_step
        ),
        idle_timeout=settings.idle_timeout,
        describe=lambda: prepare_loading(settings.model_id),
    )
    app = create_app(settings, models)
    # uvicorn re-raises the SIGTERM / SIGINT it drained for once it has shut down; absorbed here, so that a
    # graceful stop exits 0 (as the gateway's does).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    where = settings.unix_socket_path or f"{settings.host}:{settings.port}"
    scheme = "https" if settings.ssl_certfile else "http"
    log.info(
        "serving %s on %s over %s (%s, %s, quantize %s, compiled step %s)",
        settings.model_id,
        where,
        scheme,
        device,
        dtype,
        settings.quantize,
        "on" if compile_step else "off",
    )
    drain = ShutdownDrain(app, settings.shutdown_grace)
    config = uvicorn.Config(drain, log_config=log_config, **uvicorn_options(settings))
    server = DrainingServer(config, drain)
    try:
        server.run()
    finally:
        if config.uds and os.path.exists(config.uds):
            os.remove(config.uds)
    logging.shutdown()
    return 0 if server.started else STARTUP_FAILURE


class DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the drain report when the graceful stop begins."""

    def __init__(self, config: uvicorn.Config, drain: ShutdownDrain) -> None:
        super().__init__(config)
        self.drain = drain

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.drain.begin()
        await super().shutdown(sockets)


def _set_process_title(title: str) -> None:
    import setproctitle

    setproctitle.setproctitle(title)
