"""The FastAPI application: routers, error envelope, request log and metrics, and the engine's lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware

from .. import __version__
from ..config import Settings
from ..engine.model_manager import ModelManager
from ..engine.placement import helper_thread_pool
from ..engine.recognition import RecognitionEngine
from ..engine.registry import ModelRegistry
from ..engine.synthesis import Engine
from ..http_contract import (
    CORS_EXPOSED_HEADERS,
    CORS_MAX_AGE,
    CORS_METHODS,
    CORS_REQUEST_HEADERS,
    KEY_HEADERS,
    UNAUTHORIZED_CODE,
    UNAUTHORIZED_MESSAGE,
    is_open_path,
    key_accepted,
)
from ..resources import start_up_objects_kept
from ..service.metrics import CacheCounts, Metrics
from ..service.recognition.transcription import RecognitionService
from ..service.recognition.translation import Translator
from ..service.speech.alignment import SpeechAligner
from ..service.speech.audio_cache import build_audio_cache
from ..service.speech.cloning import VoiceCloner
from ..service.speech.synthesis import SpeechService
from ..service.speech.voice_library import PromptCache, VoiceLibrary, default_data_dir
from ..service.speech.voices import VoiceService
from ..text.frontend import warm_up_text_front_end
from ..wyoming_server import WyomingBackend, WyomingServer
from . import discovery, operations, playground
from .dependencies import Services
from .errors import envelope, failures, install_error_handlers
from .limits import install_limits
from .observability import InFlight, RequestObserver
from .recognition import cartesia as cartesia_listening
from .recognition import deepgram as deepgram_listening
from .recognition import live as live_transcription
from .recognition import realtime as realtime_transcription
from .recognition import transcriptions, translations
from .speech import cartesia, deepgram, elevenlabs, realtime, voices
from .speech import routes as speech


def create_app(settings: Settings, models: ModelRegistry | ModelManager) -> FastAPI:
    """The app for `settings`, speaking with the hosted models (a ModelManager: one, MODEL_ID). Their engines start
    with the app (with PRELOAD_MODEL or PRELOAD_MODELS: after loading those models) and stop with it; so does the
    Wyoming server (WYOMING_PORT), whose port is then `app.state.wyoming_port`. When a graceful stop begins, the
    server calls each of `app.state.on_drain`: the other listeners close too."""
    registry = models if isinstance(models, ModelRegistry) else ModelRegistry.single(settings.model_id, models)
    prompt_cache = PromptCache(settings.voice_cache_max)
    library = VoiceLibrary(settings.data_dir or default_data_dir(), prompt_cache)
    audio_cache = build_audio_cache(
        settings.audio_cache_max, settings.audio_cache_max_bytes, settings.redis_url, settings.audio_cache_ttl
    )
    registry.attach_engines(
        lambda manager: Engine(
            manager,
            max_batch_size=settings.max_batch_size,
            max_queue_depth=settings.max_queue_depth,
            max_frames_cap=settings.max_request_frames,
            cpu_cores=settings.cpu_cores(),
            stream_buffer_seconds=settings.stream_buffer_seconds,
            cuda_graphs=settings.cuda_graphs,
            scheduler=settings.scheduler,
            fused_kernels=settings.fused_kernels,
            max_prefills_per_step=settings.max_prefills_per_step,
        ),
        lambda manager: RecognitionEngine(
            manager,
            max_queue_depth=settings.max_queue_depth,
            cpu_cores=settings.cpu_cores(),
            cuda_graphs=settings.cuda_graphs,
        ),
    )
    voice_service = VoiceService(registry, library, VoiceCloner(prompt_cache), settings.default_voice)
    speech_service = SpeechService(
        registry,
        voice_service,
        settings.text_normalize,
        audio_cache,
        settings.request_timeout,
        settings.audio_cache_sampled,
        settings.stream_type,
        settings.token_chunks(),
        SpeechAligner(registry.speech_aligner) if registry.speech_aligner is not None else None,
    )
    caches = {"voice": lambda: CacheCounts(prompt_cache.hits, prompt_cache.misses, prompt_cache.evictions)}
    if audio_cache is not None:
        caches["audio"] = lambda: CacheCounts(audio_cache.hits, audio_cache.misses, audio_cache.evictions)
    recognition = {
        hosted.id: RecognitionService(
            hosted.recognition_engine,
            settings.request_timeout,
            settings.max_transcription_tokens,
            settings.max_transcription_bytes,
            settings.max_transcription_seconds,
            settings.live_max_sessions,
        )
        for hosted in registry.recognizers
    }
    metrics = Metrics(
        registry, caches, lambda: {model: service.live_slots.taken for model, service in recognition.items()}
    )
    in_flight = InFlight()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(helper_thread_pool())
        await asyncio.to_thread(warm_up_text_front_end)
        await asyncio.to_thread(registry.prepare)
        with start_up_objects_kept():
            await asyncio.to_thread(registry.start, settings.preload_model, settings.preload_models)
            try:
                async with AsyncExitStack() as wyoming:  # closed first: its connections' jobs end before the engine
                    if settings.wyoming_port is not None:
                        backend = WyomingBackend(
                            speech_service,
                            voice_service,
                            registry,
                            realtime.parse_request,
                            settings.max_pending_text,
                            recognition,
                            settings.live_max_pending_seconds,
                            settings.live_idle_timeout,
                        )
                        host = settings.wyoming_host or settings.host
                        server = WyomingServer(backend, host, settings.wyoming_port, settings.wyoming_zeroconf)
                        app.state.wyoming_port = (await wyoming.enter_async_context(server)).port
                        app.state.on_drain.append(server.stop_accepting)
                    yield
            finally:
                # uvicorn has cancelled what outlasted the grace period: let it wind down and be logged.
                await in_flight.drained(within=5.0)
                registry.stop()
                if audio_cache is not None:
                    await audio_cache.close()

    app = FastAPI(title="Qwen3-TTS Server", version=__version__, lifespan=lifespan, responses=failures())
    app.state.on_drain = []
    app.state.services = Services(
        settings,
        registry,
        speech_service,
        voice_service,
        metrics,
        audio_cache,
        recognition,
        Translator(
            settings.translate_base_url,
            settings.translate_model,
            settings.translate_api_key.get_secret_value() if settings.translate_api_key else None,
            settings.request_timeout,
        ),
    )
    install_error_handlers(app)
    accepted_keys = settings.accepted_keys()
    if accepted_keys:

        @app.middleware("http")
        async def require_key(request: Request, call_next):
            authorization = request.headers.get("authorization")
            others = [request.headers.get(name) for name in KEY_HEADERS]
            if not is_open_path(request.url.path) and not key_accepted(accepted_keys, authorization, *others):
                return envelope(401, UNAUTHORIZED_MESSAGE, UNAUTHORIZED_CODE)
            return await call_next(request)

    install_limits(app, settings)
    if settings.cors_origins:
        # Outside the key check: a preflight carries no key, and a page may read a 401's envelope.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=CORS_METHODS,
            allow_headers=CORS_REQUEST_HEADERS,
            expose_headers=CORS_EXPOSED_HEADERS,
            max_age=CORS_MAX_AGE,
        )
    # Outermost: it sees every request, those refused with 401 or 413 included.
    app.add_middleware(RequestObserver, metrics=metrics, in_flight=in_flight)
    app.include_router(speech.router)
    app.include_router(voices.router)
    app.include_router(transcriptions.router)
    app.include_router(transcriptions.earlier_router)
    app.include_router(translations.router)
    app.include_router(discovery.router)
    app.include_router(operations.router)
    app.include_router(realtime.router)
    app.include_router(elevenlabs.router)
    app.include_router(deepgram.router)
    app.include_router(cartesia.router)
    app.include_router(live_transcription.router)
    app.include_router(realtime_transcription.router)
    app.include_router(deepgram_listening.router)
    app.include_router(cartesia_listening.router)
    app.include_router(playground.router)
    return app
