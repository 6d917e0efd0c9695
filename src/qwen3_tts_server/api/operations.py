"""GET /metrics (Prometheus) and POST /cache/clear (the output cache)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ..http_contract import METRICS_CONTENT_TYPE
from ..text.frontend import clear_text_cache
from .dependencies import ServicesDep

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(services: ServicesDep) -> Response:
    return Response(services.metrics.exposition(), media_type=METRICS_CONTENT_TYPE)


@router.post("/cache/clear")
async def clear_cache(services: ServicesDep) -> dict:
    """Empty the output cache (with Redis: this server's entries for every replica), the clone-prompt cache and
    the text front end's cache. `audio_cleared` and `voice_cleared` are the earlier server's keys."""
    cache = services.audio_cache
    audio = await cache.clear() if cache is not None else 0
    voice = services.voices.library.cache.clear()
    text = clear_text_cache()
    return {
        "audio_cleared": audio,
        "voice_cleared": voice,
        "text_cleared": text,
        "cleared": audio,
        "enabled": cache is not None,
    }
