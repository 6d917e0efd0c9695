"""The server as a Ray Serve application: replicas (one per GPU, or per N CPUs) behind Serve's proxy, routed to
the replica with the fewest ongoing requests, autoscaled on them; the output cache in Redis and the voice library
on storage every replica sees (docs/ray.md).

Each replica builds the very app `serve` runs (api/app.py `create_app`, the engine starting in its lifespan) from
the same settings (the environment and .env, then the overrides a caller gives), through Serve's FastAPI ingress:
the app is built per replica by `__serve_build_asgi_app__`, after the replica's constructor, and Serve runs its
lifespan before the replica takes requests. Every response names its replica (`X-Replica`).

    serve run deploy/ray/serve-config.yaml       # import_path: qwen3_tts_server.ray_app:build
    qwen3-tts-server ray-serve --replicas 2      # `main`: a local Ray cluster (or RAY_ADDRESS) and this app
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any, cast

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .config import CPU_BATCH_SIZE, GPU_BATCH_SIZE, Settings, add_flags
from .errors import ConfigurationError, TTSError

try:
    import ray
    from ray import serve
    from ray.serve import Application, Deployment
except ImportError as exc:  # the optional extra
    raise ConfigurationError(f"Ray Serve is not installed ({exc}): pip install 'qwen3-tts-server[ray]'") from None

log = logging.getLogger(__name__)

APP_NAME = "qwen3-tts"
DEPLOYMENT_NAME = "Qwen3TTS"
REPLICA_HEADER = b"x-replica"
# Autoscaling aims at this share of a replica's rows busy: a new replica is asked for while the old ones still
# have rows and their queue to absorb the burst that comes during its start (docs/ray.md has the figures).
TARGET_ROW_SHARE = 0.75


class ReplicaOptions(BaseModel):
    """The application's arguments (`args:` of a Serve config, or `ray-serve`'s flags): how many replicas, what
    each holds, and settings over the environment's."""

    model_config = ConfigDict(extra="forbid")

    num_replicas: int | None = Field(None, ge=1, description="a fixed number of replicas; unset: autoscaling")
    min_replicas: int = Field(1, ge=0, description="autoscaling: the fewest replicas")
    max_replicas: int = Field(4, ge=1, description="autoscaling: the most replicas")
    target_ongoing_requests: float | None = Field(
        None, gt=0, description="autoscaling: ongoing requests per replica aimed at (default: 3/4 of its rows)"
    )
    autoscaling: dict[str, Any] = Field({}, description="more of Serve's autoscaling_config (delays, factors...)")
    num_gpus: float = Field(1, ge=0, description="GPUs per replica (0: a CPU replica)")
    num_cpus: float = Field(1, ge=0, description="CPUs per replica (its torch threads follow: OMP_NUM_THREADS)")
    settings: dict[str, Any] = Field({}, description="settings over the environment's, by field name")

    @model_validator(mode="after")
    def _replica_range(self) -> ReplicaOptions:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} is above max_replicas {self.max_replicas}")
        return self


def replica_batch_size(settings: Settings, options: ReplicaOptions) -> int:
    """MAX_BATCH_SIZE, or the engine's default for the device a replica gets."""
    return settings.max_batch_size or (GPU_BATCH_SIZE if options.num_gpus > 0 else CPU_BATCH_SIZE)


def deployment_options(settings: Settings, options: ReplicaOptions) -> dict[str, Any]:
    """Serve's options for the deployment. A replica takes at most its rows and its queue
    (MAX_BATCH_SIZE + MAX_QUEUE_DEPTH): the router sends a full replica nothing more. What no replica can take waits
    in each proxy, MAX_QUEUE_DEPTH at most (then 503, as a full `serve`), while autoscaling adds a replica; with
    MAX_QUEUE_DEPTH 0 (no limit) a replica takes its rows and the proxies queue the rest without limit."""
    rows = replica_batch_size(settings, options)
    queue = settings.max_queue_depth
    scaling: dict[str, Any] = {}
    if options.num_replicas is None:
        target = options.target_ongoing_requests or max(1, math.floor(TARGET_ROW_SHARE * rows))
        scaling["autoscaling_config"] = {
            "min_replicas": options.min_replicas,
            "max_replicas": options.max_replicas,
            "target_ongoing_requests": target,
            **options.autoscaling,
        }
    else:
        scaling["num_replicas"] = options.num_replicas
    return {
        "name": DEPLOYMENT_NAME,
        "max_ongoing_requests": rows + queue,
        "max_queued_requests": queue or -1,
        "ray_actor_options": {"num_gpus": options.num_gpus, "num_cpus": options.num_cpus},
        # A replica that stops (scaled down, redeployed) lets its streams finish as `serve` does on SIGTERM.
        "graceful_shutdown_timeout_s": settings.shutdown_grace,
        **scaling,
    }


class ReplicaHeader:
    """Names the replica that answered: `X-Replica` on every HTTP response and WebSocket handshake."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.name = name.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return

        async def naming(message: Message) -> None:
            if message["type"] in ("http.response.start", "websocket.accept"):
                message["headers"] = [*message.get("headers", []), (REPLICA_HEADER, self.name)]
            await send(message)

        await self.app(scope, receive, naming)


async def raise_unless_ready(app: FastAPI) -> None:
    """The replica's GET /ready, as Serve's health check: raises with /ready's reason when it answers 503."""
    import json

    from .api.discovery import ready

    response = await ready(app.state.services)
    if response.status_code != 200:
        raise RuntimeError(f"not ready: {json.loads(bytes(response.body)).get('error')}")


class Qwen3TTSReplica:
    """One replica: the app `serve` runs, built for this replica from its settings."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from .logs import configure_logging

        self.settings = Settings.load(**settings)
        configure_logging(self.settings.log_format, self.settings.log_level)
        self.tts_app: FastAPI | None = None  # `app` is Serve's (the ASGI app it runs)

    def __serve_build_asgi_app__(self) -> FastAPI:
        from .api.app import create_app
        from .server import prepare_model

        # As `serve` prepares it: a checkpoint that cannot be found or a bad setting fails the replica's start.
        app = create_app(self.settings, prepare_model(self.settings).registry)
        app.add_middleware(ReplicaHeader, name=serve.get_replica_context().replica_id.unique_id)
        self.tts_app = app
        return app

    async def check_health(self) -> None:
        if self.tts_app is not None:
            await raise_unless_ready(self.tts_app)


# Serve's FastAPI ingress without an app: `__serve_build_asgi_app__` builds it in each replica, after __init__.
REPLICA = cast(Deployment, serve.deployment(serve.ingress()(Qwen3TTSReplica)))


def build(args: dict[str, Any]) -> Application:
    """The application for a Serve config (`import_path: qwen3_tts_server.ray_app:build`, `args:` the
    ReplicaOptions). Settings are read here as the replicas will read them: the environment (the config's
    runtime_env env_vars, the pods' env) and `settings`; MAX_BATCH_SIZE is fixed here, so that the rows the
    router counts on are the rows each replica's engine has."""
    options = ReplicaOptions.model_validate(args)
    settings = Settings.load(**options.settings)
    if settings.wyoming_port is not None:  # every replica would bind it, none behind the proxy's balancing
        raise ConfigurationError("WYOMING_PORT: Serve's proxy carries HTTP and WebSocket; run Wyoming with `serve`")
    replica_settings = {**options.settings, "max_batch_size": replica_batch_size(settings, options)}
    return REPLICA.options(**deployment_options(settings, options)).bind(replica_settings)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qwen3-tts-server ray-serve",
        description="Run the server as a Ray Serve application: replicas behind Serve's proxy on HOST:PORT, on a "
        "local Ray cluster started here or the one RAY_ADDRESS (--address) names. Settings as for `serve`.",
    )
    deployment = parser.add_argument_group("replicas")
    deployment.add_argument("--address", help="Ray cluster to join (default: RAY_ADDRESS, else start a local one)")
    deployment.add_argument("--replicas", type=int, dest="num_replicas", help="a fixed number (default: autoscale)")
    for name, field in ReplicaOptions.model_fields.items():
        if name in ("num_replicas", "autoscaling", "settings"):
            continue
        kind = int if field.annotation is int else float
        deployment.add_argument(
            "--" + name.replace("_", "-"), type=kind, help=f"{field.description} (default {field.default})"
        )
    add_flags(parser)
    return parser


def main(argv: list[str]) -> int:
    """`qwen3-tts-server ray-serve`: deploy the application, serve until SIGTERM or Ctrl-C, then take it down."""
    from .config import from_args
    from .logs import configure_logging

    args = _parser().parse_args(argv)
    try:
        settings = from_args(args)
        if settings.unix_socket_path is not None:
            raise ConfigurationError("UNIX_SOCKET_PATH: Serve's proxy listens on HOST:PORT only")
        given = _given(args, Settings.model_fields)
        application = build({**_given(args, ReplicaOptions.model_fields), "settings": given})
    except (TTSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    local = args.address is None and not os.environ.get("RAY_ADDRESS")
    ray.init(address=args.address)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options=_http_options(settings))
        serve.run(application, name=APP_NAME, route_prefix="/")
        log.info(
            "serving %s on %s:%d through Ray Serve", ", ".join(settings.hosted_models()), settings.host, settings.port
        )
        stop.wait()
    finally:
        if local:
            serve.shutdown()
        else:
            serve.delete(APP_NAME)
        ray.shutdown()
    return 0


def _given(args: argparse.Namespace, fields: Iterable[str]) -> dict[str, Any]:
    """The flags given on the command line among `fields`."""
    return {name: getattr(args, name) for name in fields if getattr(args, name, None) is not None}


def _http_options(settings: Settings) -> dict[str, Any]:
    """Serve's proxy where `serve` would listen, with its TLS and keep-alive."""
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "keep_alive_timeout_s": math.ceil(settings.timeout_keep_alive),
    }
    if settings.ssl_certfile is not None:
        options.update(ssl_keyfile=str(settings.ssl_keyfile), ssl_certfile=str(settings.ssl_certfile))
    return options
