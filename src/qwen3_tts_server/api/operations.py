"""GET /metrics (Prometheus) and POST /cache/clear (the output cache)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ..http_contract import METRICS_CONTENT_TYPE
from .dependencies import ServicesDep

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(services: ServicesDep) -> Response:
    return Response(services.metrics.exposition(), media_type=METRICS_CONTENT_TYPE)


@router.post("/cache/clear")
async def clear_cache(services: ServicesDep) -> dict:
    """Empty the output cache (with Redis: this server's entries for every replica)."""
    cache = services.audio_cache
    removed = await cache.clear() if cache is not None else 0
    return {"cleared": removed, "enabled": cache is not None}
