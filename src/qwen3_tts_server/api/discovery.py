"""GET /v1/models, GET /v1/audio/models, GET /health, GET /v1/info, GET /ready."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..engine.registry import HostedModel, ModelRegistry
from ..errors import TTSError
from ..service.health import earlier_server_keys, health_report, loaded_model_id
from ..service.speech.routing import OPENAI_MODELS, route, short_name
from .dependencies import ServicesDep

router = APIRouter()


def openai_speech_names(registry: ModelRegistry) -> tuple[str, ...]:
    """OpenAI's speech model names, each routed to a hosted speech model: none in a server of recognisers alone."""
    return OPENAI_MODELS if len(registry) else ()


@router.get("/v1/models")
async def list_models(services: ServicesDep) -> dict:
    """Every hosted model, from its checkpoint's config (no model is loaded for it, nor kept from idling out), then
    the OpenAI names with the model each resolves to for the default voice (`alias_of`; `routing.route`)."""
    registry = services.registry
    if len(registry) == 1:
        await asyncio.to_thread(registry.default.manager.config)  # an unreadable lone checkpoint answers its error
    entries = [hosted_model_entry(hosted) for hosted in registry]
    entries += [recognizer_entry(hosted) for hosted in registry.recognizers]
    voice, library = services.voices.default_voice, services.voices.library
    for name in openai_speech_names(registry):
        try:
            resolved = (await asyncio.to_thread(route, registry, library, name, voice)).id
        except TTSError:  # no hosted model speaks the default voice: a request must name one
            resolved = None
        entries.append({**entries[0], "id": name, "alias_of": resolved})
    return {"object": "list", "data": entries}


@router.get("/v1/audio/models")
async def list_speech_models(services: ServicesDep) -> dict:
    """The names a speech request's `model` takes (the hosted speech models, then OpenAI's), as `{"models": [{id}]}`:
    the list Open WebUI's speech model picker reads."""
    names = [hosted.id for hosted in services.registry] + list(openai_speech_names(services.registry))
    return {"models": [{"id": name} for name in names]}


@router.get("/health")
async def health(services: ServicesDep) -> JSONResponse:
    """200, or 503 with the reason in `error` once an engine thread has stopped (its model can serve nothing)."""
    voices = await services.voices.accepted_names()
    primary, library = services.registry.primary, services.voices.library
    earlier = earlier_server_keys(primary, voices, library, services.audio_cache)
    report = health_report(primary, library, services.audio_cache, earlier)
    failure = services.registry.failure  # any hosted model's engine thread that stopped
    if len(services.registry.every) > 1:  # several models, of either family
        report["models"] = {hosted.id: hosted_model_health(hosted) for hosted in services.registry.every}
        report["shared"] = services.registry.shared()
        if failure is not None:
            report |= {"status": "failed", "error": failure}
    return JSONResponse(report, status_code=200 if failure is None else 503)


@router.get("/v1/info")
async def info(services: ServicesDep) -> dict:
    """The earlier server's capability summary: how audio streams by default (STREAM_TYPE: `token`, in chunks of
    frames as they are made; `sentence`, a chunk per text segment), every voice name a request may give, and the
    model (null until it first loads, as there)."""
    voices = await services.voices.accepted_names()
    return {
        "stream_type": services.settings.stream_type,
        "voices": voices,
        "model_id": loaded_model_id(services.registry.primary),
    }


@router.get("/ready")
async def ready(services: ServicesDep) -> JSONResponse:
    """Ready once started (a model that is not loaded loads on the first request), unless the engine thread has
    stopped or the last attempt to load the model failed; then 503 with the reason in `error`, and the load is
    tried again in the background (a checkpoint fixed in place makes the replica ready without a request)."""
    errors = {}
    for hosted in services.registry.every:
        models, engine = hosted.manager, hosted.row_engine
        error = engine.failure or models.last_error
        if engine.failure is None and models.last_error is not None:
            models.retry_failed_load()
        if error is not None:
            errors[hosted.id] = error
    body: dict[str, object] = {"ready": not errors, "model": services.registry.primary.manager.state.value}
    every = services.registry.every
    if len(every) > 1:
        body["models"] = {hosted.id: hosted.manager.state.value for hosted in every}
    if errors:
        named = len(every) > 1
        body["error"] = "; ".join(f"{model_id}: {error}" if named else error for model_id, error in errors.items())
    return JSONResponse(body, status_code=200 if not errors else 503)


def hosted_model_entry(hosted: HostedModel) -> dict:
    """A hosted model as /v1/models lists it: OpenAI's fields, then what it is and speaks."""
    config = hosted.config or hosted.manager.known_config()
    entry = {"id": hosted.id, "object": "model", "created": 0, "owned_by": "qwen3-tts-server", "kind": "tts"}
    if config is not None:
        entry |= {"type": config.model_type, "size": config.model_size, "short_name": short_name(hosted)}
        entry |= {"languages": config.languages, "speakers": config.speakers}
    return entry | {"state": hosted.manager.state.value}


def recognizer_entry(hosted: HostedModel) -> dict:
    """A hosted recognition model as /v1/models lists it: OpenAI's fields, its kind, the languages it hears, and
    the ForcedAligner (a directory's name or a hub id) that times its words, if one is hosted."""
    description = hosted.description
    entry = {"id": hosted.id, "object": "model", "created": 0, "owned_by": "qwen3-tts-server", "kind": hosted.kind}
    if description is not None:
        entry |= {"languages": list(description.languages)}
    return entry | {"aligner": hosted.aligner.id if hosted.aligner else None, "state": hosted.manager.state.value}


def hosted_model_health(hosted: HostedModel) -> dict:
    engine, manager = hosted.row_engine, hosted.manager
    return {
        "state": manager.state.value,
        "kind": hosted.kind,
        "type": hosted.config.model_type if hosted.config else None,
        "loads": manager.loads,
        "error": engine.failure or manager.last_error,
        "queue_depth": engine.waiting,
        "active_streams": engine.active,
        "engine_thread": engine.thread_alive,
        "footprint_bytes": hosted.footprint.own if hosted.footprint else None,
    }
