"""POST /v1/audio/speech: streamed audio in every format, SSE, or the whole file at once."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from ..service.speech import prepare
from .schemas import SpeechRequest

router = APIRouter()
STREAM_HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}


@router.post("/v1/audio/speech")
async def create_speech(body: SpeechRequest, request: Request) -> Response:
    state = request.app.state
    speech = prepare(state.engine, state.models.get(), body)
    if body.stream_format == "sse":
        return StreamingResponse(speech.sse(), media_type="text/event-stream", headers=STREAM_HEADERS)
    if body.stream:
        return StreamingResponse(speech.audio(), media_type=speech.encoder.media_type, headers=STREAM_HEADERS)
    content = b"".join([part async for part in speech.audio()])
    headers = {"X-Latency-First-Audio-Ms": f"{1000 * (speech.first_audio or 0):.1f}"}
    return Response(content, media_type=speech.encoder.media_type, headers=headers)
