"""The FastAPI application: routers, error envelope, and the engine's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ..engine.engine import Engine
from ..engine.model_manager import ModelManager
from . import discovery, speech
from .errors import install_error_handlers


def create_app(models: ModelManager, model_id: str, **engine_options) -> FastAPI:
    """`models` supplies the model; the engine starts with the app (loading the model first) and stops with it."""

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
    install_error_handlers(app)
    app.include_router(speech.router)
    app.include_router(discovery.router)
    return app
