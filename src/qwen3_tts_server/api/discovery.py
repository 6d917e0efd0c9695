"""GET /v1/models, GET /health, GET /ready."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..service.health import health_report
from .dependencies import ServicesDep

router = APIRouter()
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


@router.get("/v1/models")
async def list_models(services: ServicesDep) -> dict:
    model = await asyncio.to_thread(services.models.get)
    model_id = services.settings.model_id
    base = {
        "object": "model",
        "created": 0,
        "owned_by": "qwen3-tts-server",
        "type": model.model_type,
        "size": model.config.model_size,
    }
    entries = [{"id": model_id, **base}]
    entries += [{"id": alias, **base, "alias_of": model_id} for alias in MODEL_ALIASES]
    return {"object": "list", "data": entries}


@router.get("/health")
async def health(services: ServicesDep) -> dict:
    return health_report(services.models, services.engine, services.voices.library)


@router.get("/ready")
async def ready(services: ServicesDep) -> JSONResponse:
    """Ready once started (a model that is not loaded loads on the first request), unless the last attempt to
    load the model failed."""
    models = services.models
    body = {"ready": models.last_error is None, "model": models.state.value}
    if models.last_error is not None:
        body["error"] = models.last_error
    return JSONResponse(body, status_code=200 if models.last_error is None else 503)
