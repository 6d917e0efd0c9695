"""GET /v1/models, GET /v1/audio/voices, GET /health, GET /ready."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ..service.speech import OPENAI_VOICES, preset_voices

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


@router.get("/v1/audio/voices")
async def list_voices(request: Request) -> dict:
    model = request.app.state.models.get()
    voices = [{"id": name, "name": name, "type": "preset"} for name in model.speakers]
    voices += [
        {"id": alias, "name": alias, "type": "alias", "alias_of": target}
        for alias, target in sorted(preset_voices(model).items())
        if alias in OPENAI_VOICES
    ]
    return {"object": "list", "data": voices}


@router.get("/health")
async def health(request: Request) -> dict:
    state = request.app.state
    return {
        "status": "ok",
        "model": state.models.state.value,
        "waiting": state.engine.waiting,
        "active": state.engine.active,
    }


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    state = request.app.state.models.state.value
    return JSONResponse({"ready": state == "ready", "model": state}, status_code=200 if state == "ready" else 503)
