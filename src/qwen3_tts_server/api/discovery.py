"""GET /v1/models, GET /health, GET /v1/info, GET /ready."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..service.health import earlier_server_keys, health_report, loaded_model_id
from .dependencies import ServicesDep

router = APIRouter()
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


@router.get("/v1/models")
async def list_models(services: ServicesDep) -> dict:
    """From the checkpoint's config: the model is not loaded for it, nor kept from idling out."""
    config = await asyncio.to_thread(services.models.config)
    model_id = services.settings.model_id
    base = {
        "object": "model",
        "created": 0,
        "owned_by": "qwen3-tts-server",
        "type": config.model_type,
        "size": config.model_size,
    }
    entries = [{"id": model_id, **base}]
    entries += [{"id": alias, **base, "alias_of": model_id} for alias in MODEL_ALIASES]
    return {"object": "list", "data": entries}


@router.get("/health")
async def health(services: ServicesDep) -> JSONResponse:
    """200, or 503 with the reason in `error` once the engine thread has stopped (nothing can be served)."""
    voices = await services.voices.accepted_names()
    model_id = loaded_model_id(services.models, services.settings)
    models, engine, library = services.models, services.engine, services.voices.library
    earlier = earlier_server_keys(models, model_id, engine, voices, library, services.audio_cache)
    report = health_report(models, engine, library, services.audio_cache, earlier)
    return JSONResponse(report, status_code=200 if services.engine.failure is None else 503)


@router.get("/v1/info")
async def info(services: ServicesDep) -> dict:
    """The earlier server's capability summary: how audio streams by default (STREAM_TYPE: `token`, in chunks of
    frames as they are made; `sentence`, a chunk per text segment), every voice name a request may give, and the
    model (null until it first loads, as there)."""
    voices = await services.voices.accepted_names()
    return {
        "stream_type": services.settings.stream_type,
        "voices": voices,
        "model_id": loaded_model_id(services.models, services.settings),
    }


@router.get("/ready")
async def ready(services: ServicesDep) -> JSONResponse:
    """Ready once started (a model that is not loaded loads on the first request), unless the engine thread has
    stopped or the last attempt to load the model failed; then 503 with the reason in `error`, and the load is
    tried again in the background (a checkpoint fixed in place makes the replica ready without a request)."""
    models = services.models
    error = services.engine.failure or models.last_error
    if services.engine.failure is None and models.last_error is not None:
        models.retry_failed_load()
    body = {"ready": error is None, "model": models.state.value}
    if error is not None:
        body["error"] = error
    return JSONResponse(body, status_code=200 if error is None else 503)
