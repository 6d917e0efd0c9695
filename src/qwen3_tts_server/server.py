"""`qwen3-tts-server serve`: the full server in this process, from the settings to a running uvicorn; and
`qwen3-tts-server wyoming`: the same app's engine and Wyoming port without HTTP.

SIGTERM (or Ctrl-C) drains: the listening socket closes at once, in-flight requests and streams get
SHUTDOWN_GRACE seconds to finish, what is left is then cancelled (its engine rows freed), the engine stops,
one line sums the drain up (in flight at the signal, finished, cut, seconds), the last log lines are flushed
and the exit status is 0."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from .api.observability import ShutdownDrain
from .config import Settings, model_id_of, unsupported_variable_warnings
from .gateway.listen import uvicorn_options

if TYPE_CHECKING:
    from .engine.registry import ModelRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedModel:
    """The models a server will run, checked but not loaded (the app's lifespan and PRELOAD_MODEL decide when)."""

    registry: ModelRegistry
    device: str
    compiled: bool


def prepare_model(settings: Settings) -> PreparedModel:
    """Every hosted checkpoint found, the device, dtype, quantisation and memory budget checked: a bad setting
    fails here, before a port is bound."""
    from .model.device import parse_device
    from .model.quantization import parse_quantization
    from .service.speech.voice_library import default_data_dir

    device = settings.resolved_device()
    dtype = settings.resolved_dtype(device)
    parse_quantization(settings.resolved_quantization(), parse_device(device))  # fp8 without CUDA fails here
    compile_step = settings.resolved_compile()
    if compile_step:  # inductor's compiled code kept beside the voice library, so that a restart reuses it
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str((settings.data_dir or default_data_dir()) / "compiled"))
    return PreparedModel(build_registry(settings, device, dtype, compile_step), device, compile_step)


def build_registry(settings: Settings, device: str, dtype: str, compile_step: bool) -> ModelRegistry:
    """A ModelManager for each checkpoint of MODELS (or MODEL_ID), each with the id of its hub id or directory
    name; two entries naming one checkpoint host it once."""
    from .engine.model_manager import ModelManager
    from .engine.recognition import load_forced_aligner, load_transcriber, warm_up_transcriber
    from .engine.registry import HostedAligner, HostedModel, ModelRegistry
    from .errors import ConfigurationError
    from .model.asr.loading import describe_asr_checkpoint, is_asr_config
    from .model.checkpoint import read_json, resolve_checkpoint
    from .model.device import cpu_multiplies_bfloat16, parse_device, parse_dtype
    from .model.footprint import free_memory_bytes
    from .model.tts.loading import prepare_loading
    from .model.tts.tts_model import Qwen3TTSModel

    hosted: list[HostedModel] = []
    recognizers: list[HostedModel] = []

    def kind_of(directory: Path) -> str:
        """tts, asr or forced_aligner, by the checkpoint's config."""
        return describe_asr_checkpoint(directory).kind if is_asr_config(read_json(directory / "config.json")) else "tts"

    sources = []
    for source in settings.hosted_models():
        directory = resolve_checkpoint(source, required=("config.json",))
        sources.append((source, directory, kind_of(directory)))
    aligners = [(source, directory) for source, directory, kind in sources if kind == "forced_aligner"]
    if len({directory.resolve() for _, directory in aligners}) > 1:
        raise ConfigurationError(f"MODELS names {len(aligners)} ForcedAligner checkpoints; one times every transcript")
    aligner = HostedAligner(model_id_of(aligners[0][0]), aligners[0][1]) if aligners else None
    precision = settings.precision(device, cpu_multiplies_bfloat16())  # a speech model's or a transcriber's
    for source, directory, kind in sources:
        if kind == "forced_aligner":
            continue
        every = hosted + recognizers
        same = next((other for other in every if other.directory and other.directory.samefile(directory)), None)
        if same is not None:
            log.warning("MODELS names %s twice (as %s and %s): hosted once", directory, same.source, source)
            continue
        model_id, copies = model_id_of(source), 1  # two directories of one name: name, name-2, ...
        while any(other.id == model_id for other in every):
            copies += 1
            model_id = f"{model_id_of(source)}-{copies}"
        make_room = partial(lambda model_id: registry.make_room(model_id), model_id)
        others_loaded = partial(lambda model_id: registry.others_loaded(model_id), model_id)
        if kind == "asr":
            aligner_directory = aligner.directory if aligner else None
            load = partial(
                load_transcriber,
                directory,
                device,
                precision.dtype,
                precision.quantize,
                aligner_directory,
                settings.korean_words,
                settings.prefill_weights,
                (dtype, settings.resolved_quantization()),
            )
            recognizer = ModelManager(
                load,
                warmup=warm_up_transcriber,
                describe=partial(describe_asr_checkpoint, directory),
                config_of=lambda transcriber: transcriber.model.description,
                idle_timeout=settings.idle_timeout,
                before_load=make_room,
                others_loaded=others_loaded,
            )
            recognizers.append(
                HostedModel(
                    model_id,
                    source,
                    recognizer,
                    directory,
                    parse_dtype(precision.dtype),
                    kind=kind,
                    aligner=aligner,
                    precision=precision.why,
                )
            )
            continue
        resolve_checkpoint(directory)  # a speech checkpoint's files are all there
        manager = ModelManager(
            partial(
                Qwen3TTSModel.load,
                source,
                device=device,
                dtype=precision.dtype,
                quantize=precision.quantize,
                compile=compile_step,
                trace_predictor=settings.traced_predictor == "auto",
            ),
            idle_timeout=settings.idle_timeout,
            describe=partial(prepare_loading, source),
            before_load=make_room,
            others_loaded=others_loaded,
        )
        hosted.append(
            HostedModel(model_id, source, manager, directory, parse_dtype(precision.dtype), precision=precision.why)
        )
    if aligner is not None and not hosted and not recognizers:
        raise ConfigurationError(
            f"MODELS names the ForcedAligner {aligners[0][0]} alone: it times the words of speech or of transcripts, "
            "so host a speech model (Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice) or a transcriber (Qwen/Qwen3-ASR-0.6B) "
            "beside it"
        )
    speech_aligner = None  # a transcriber's loads the aligner with it; alone, the aligner loads when first asked
    if aligner is not None:
        speech_aligner = recognizers[0].manager if recognizers else ModelManager(
            partial(load_forced_aligner, aligner.directory, device, dtype, settings.resolved_quantization(),
                    settings.korean_words),
            warmup=None,
            describe=partial(describe_asr_checkpoint, aligner.directory),
            config_of=lambda timer: timer.checkpoint.description,
        )  # fmt: skip
    if settings.huge_pages == "auto" and parse_device(device).type == "cpu":
        managers = [model.manager for model in hosted + recognizers]
        if speech_aligner is not None and speech_aligner not in managers:
            managers.append(speech_aligner)
        for manager in managers:
            manager.on_ready.append(collapse_in_background)
    budget = settings.memory_budget_bytes()
    if settings.model_memory_budget == "auto":
        free = free_memory_bytes(parse_device(device))
        budget = free - free // 10
    registry = ModelRegistry(
        hosted,
        budget,
        wait_seconds=settings.request_timeout or 60.0,
        recognizers=recognizers,
        speech_aligner=speech_aligner,
    )
    return registry


_COLLAPSING = threading.Lock()  # one collapse at a time: a second finds the first's pages already huge


def collapse_in_background() -> None:
    """After a model loaded on a CPU: the process's memory that is resident in whole 2 MiB windows moved into huge
    pages (`resources.collapse_into_huge_pages`, seconds a gigabyte) on a thread of its own, the model serving
    meanwhile."""
    threading.Thread(target=_collapse, name="huge-pages", daemon=True).start()


def _collapse() -> None:
    from .resources import collapse_into_huge_pages, huge_pages_mode, huge_pages_usable

    if not huge_pages_usable():
        mode = huge_pages_mode()
        log.info("huge pages: not used (the kernel's transparent huge page mode is %s)", mode or "unknown")
        return
    with _COLLAPSING:
        started = time.monotonic()
        done = collapse_into_huge_pages()
    refused = sum(done.refused.values())
    reasons = ", ".join(f"{reason} {size / 2**30:.2f} GiB" for reason, size in sorted(done.refused.items()))
    log.info(
        "huge pages: %.2f GiB moved into 2 MiB pages in %.1f s%s",
        done.moved / 2**30,
        time.monotonic() - started,
        f" ({refused / 2**30:.2f} GiB could not be: {reasons})" if refused else "",
    )


def serve(settings: Settings) -> int:
    from .api.app import create_app
    from .logs import configure_logging

    log_config = configure_logging(settings.log_format, settings.log_level)
    _set_process_title(f"qwen3-tts-server serve {','.join(settings.hosted_models())}")
    for warning in unsupported_variable_warnings():
        log.warning(warning)
    prepared = prepare_model(settings)
    app = create_app(settings, prepared.registry)
    # uvicorn re-raises the SIGTERM / SIGINT it drained for once it has shut down; absorbed here, so that a
    # graceful stop exits 0 (as the gateway's does).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    where = settings.unix_socket_path or f"{settings.host}:{settings.port}"
    scheme = "https" if settings.ssl_certfile else "http"
    log.info(
        "serving %s on %s over %s (%s, compiled step %s)",
        ", ".join(hosted.id for hosted in prepared.registry.every),
        where,
        scheme,
        prepared.device,
        "on" if prepared.compiled else "off",
    )
    log_precisions(prepared.registry)
    drain = ShutdownDrain(app, settings.shutdown_grace)
    config = uvicorn.Config(drain, log_config=log_config, **uvicorn_options(settings))
    server = DrainingServer(config, drain, app.state.on_drain)
    try:
        server.run(sockets=[listening_socket(config, settings.send_buffer_bytes)])
    finally:
        if config.uds and os.path.exists(config.uds):
            os.remove(config.uds)
    logging.shutdown()
    return 0 if server.started else STARTUP_FAILURE


def serve_wyoming(settings: Settings) -> int:
    """The app's lifespan (engine and Wyoming port) without an HTTP server, until SIGTERM or SIGINT."""
    from .api.app import create_app
    from .logs import configure_logging

    configure_logging(settings.log_format, settings.log_level)
    _set_process_title(f"qwen3-tts-server wyoming {settings.model_id}")
    for warning in unsupported_variable_warnings():
        log.warning(warning)
    prepared = prepare_model(settings)
    app = create_app(settings, prepared.registry)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with app.router.lifespan_context(app):
            log.info("serving %s over Wyoming only (%s)", settings.model_id, prepared.device)
            log_precisions(prepared.registry)
            await stop.wait()
            log.info("stopping the Wyoming server")

    asyncio.run(run())
    logging.shutdown()
    return 0


def log_precisions(registry: ModelRegistry) -> None:
    """A line per hosted model: the dtype it loads in, and why that precision (`ModelSettings.precision`)."""
    for hosted in registry.every:
        log.info("%s in %s: %s", hosted.id, str(hosted.dtype).removeprefix("torch."), hosted.precision)


def listening_socket(config: uvicorn.Config, send_buffer_bytes: int) -> socket.socket:
    """uvicorn's listening socket with `send_buffer_bytes` as its send buffer, which every connection it accepts
    inherits: a client that stops reading then leaves that much audio in the kernel, where a buffer the OS sizes
    itself grows to MBs (a minute of speech) that the engine would have made for nobody."""
    sock = config.bind_socket()
    if send_buffer_bytes:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
    return sock


class DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the drain report and the app's other listeners (`on_drain`: the Wyoming port) when
    the graceful stop begins."""

    def __init__(self, config: uvicorn.Config, drain: ShutdownDrain, on_drain: list[Callable[[], None]]) -> None:
        super().__init__(config)
        self.drain = drain
        self.on_drain = on_drain

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.drain.begin()
        for stop_accepting in self.on_drain:
            stop_accepting()
        await super().shutdown(sockets)


def _set_process_title(title: str) -> None:
    import setproctitle

    setproctitle.setproctitle(title)
