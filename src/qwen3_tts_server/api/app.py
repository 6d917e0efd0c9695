"""The FastAPI application: routers, error envelope, request log and metrics, and the engine's lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request

from ..engine.engine import Engine
from ..engine.model_manager import ModelManager
from ..http_contract import OPEN_PATHS, UNAUTHORIZED_CODE, UNAUTHORIZED_MESSAGE, key_accepted
from ..service.audio_cache import AudioCache
from ..service.cloning import VoiceCloner
from ..service.metrics import CacheCounts, Metrics
from ..service.speech import SpeechService
from ..service.voice_library import PromptCache, VoiceLibrary, default_data_dir
from ..text.frontend import warm_up as warm_up_text
from . import discovery, operations, realtime, speech, voices
from .errors import envelope, install_error_handlers, limit_upload_size
from .observability import InFlight, RequestObserver


def create_app(
    models: ModelManager,
    model_id: str,
    api_key: str | None = None,
    data_dir: str | Path | None = None,
    voice_cache_max: int = 32,
    normalize_text: bool = True,
    audio_cache: AudioCache | None = None,
    request_timeout: float = 0.0,
    preload: bool = True,
    **engine_options,
) -> FastAPI:
    """`models` supplies the model; the engine starts with the app (`preload`: loading the model first) and
    stops with it. With `api_key`, every route but /health, /ready and /metrics needs `Authorization: Bearer
    <api_key>`. The voice library lives in `data_dir` (default: the user's data directory); `voice_cache_max`
    clone prompts stay in memory. `normalize_text` is the default of the requests' `normalize` (numbers,
    dates, symbols... in words). `audio_cache` keeps whole responses; `request_timeout` bounds a request."""
    cache = PromptCache(voice_cache_max)
    library = VoiceLibrary(data_dir or default_data_dir(), cache)
    engine = Engine(models, **engine_options)
    service = SpeechService(engine, models, library, VoiceCloner(cache), normalize_text, audio_cache, request_timeout)
    caches = {"voice": lambda: CacheCounts(cache.hits, cache.misses, cache.evictions)}
    if audio_cache is not None:
        caches["audio"] = lambda: CacheCounts(audio_cache.hits, audio_cache.misses, audio_cache.evictions)
    metrics = Metrics(engine, caches)
    in_flight = InFlight()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(warm_up_text)
        await asyncio.to_thread(engine.start, preload)
        try:
            yield
        finally:
            # uvicorn has cancelled what outlasted the grace period: let it wind down and be logged.
            await in_flight.drained(within=5.0)
            engine.stop()
            if audio_cache is not None:
                await audio_cache.close()

    app = FastAPI(title="Qwen3-TTS Server", lifespan=lifespan)
    app.state.models = models
    app.state.model_id = model_id
    app.state.api_key = api_key
    app.state.engine = engine
    app.state.speech = service
    app.state.metrics = metrics
    install_error_handlers(app)
    limit_upload_size(app)
    if api_key:

        @app.middleware("http")
        async def require_key(request: Request, call_next):
            if request.url.path not in OPEN_PATHS and not key_accepted(api_key, request.headers.get("authorization")):
                return envelope(401, UNAUTHORIZED_MESSAGE, UNAUTHORIZED_CODE)
            return await call_next(request)

    # Outermost: it sees every request, those refused with 401 or 413 included.
    app.add_middleware(RequestObserver, metrics=metrics, in_flight=in_flight)
    app.include_router(speech.router)
    app.include_router(voices.router)
    app.include_router(discovery.router)
    app.include_router(operations.router)
    app.include_router(realtime.router)
    return app
