"""GET /v1/models, GET /health, GET /ready."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ..service.health import health_report

router = APIRouter()
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    state = request.app.state
    model = state.models.get()
    base = {
        "object": "model",
        "created": 0,
        "owned_by": "qwen3-tts-server",
        "type": model.model_type,
        "size": model.config.model_size,
    }
    entries = [{"id": state.model_id, **base}]
    entries += [{"id": alias, **base, "alias_of": state.model_id} for alias in MODEL_ALIASES]
    return {"object": "list", "data": entries}


@router.get("/health")
async def health(request: Request) -> dict:
    speech = request.app.state.speech
    return health_report(speech.models, speech.engine, speech.library)


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    """Ready once started (a model that is not loaded loads on the first request), unless the last attempt to
    load the model failed."""
    models = request.app.state.models
    body = {"ready": models.last_error is None, "model": models.state.value}
    if models.last_error is not None:
        body["error"] = models.last_error
    return JSONResponse(body, status_code=200 if models.last_error is None else 503)
