"""The FastAPI application: routers, error envelope, and the engine's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from ..engine.engine import Engine
from ..engine.model_manager import ModelManager
from . import discovery, speech
from .auth import OPEN_PATHS, bearer_matches
from .errors import envelope, install_error_handlers


def create_app(models: ModelManager, model_id: str, api_key: str | None = None, **engine_options) -> FastAPI:
    """`models` supplies the model; the engine starts with the app (loading the model first) and stops with
    it. With `api_key`, every route but /health needs `Authorization: Bearer <api_key>`."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = Engine(models, **engine_options).start(preload=True)
        try:
            yield
        finally:
            app.state.engine.stop()

    app = FastAPI(title="Qwen3-TTS Server", lifespan=lifespan)
    app.state.models = models
    app.state.model_id = model_id
    app.state.api_key = api_key
    install_error_handlers(app)
    if api_key:

        @app.middleware("http")
        async def require_key(request: Request, call_next):
            if request.url.path not in OPEN_PATHS and not bearer_matches(request.headers.get("authorization"), api_key):
                return envelope(401, "missing or wrong API key (Authorization: Bearer ...)", "invalid_api_key")
            return await call_next(request)

    app.include_router(speech.router)
    app.include_router(discovery.router)
    return app
