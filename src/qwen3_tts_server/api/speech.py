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
    return Response(content, media_type=speech.encoder.media_type, headers=speech.latency_headers())


@router.post("/v1/audio/speech/stream")
async def stream_speech_sse(body: SpeechRequest, request: Request) -> Response:
    """The earlier server's SSE path: base64 16-bit PCM deltas, the done event, then `data: [DONE]`."""
    body = body.model_copy(update={"response_format": "pcm", "stream_format": "sse"})
    speech = prepare(request.app.state.engine, request.app.state.models.get(), body)

    async def events():
        async for event in speech.sse():
            yield event
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers=STREAM_HEADERS)


@router.post("/v1/audio/speech/stream/pcm")
async def stream_speech_pcm(body: SpeechRequest, request: Request) -> Response:
    """The earlier server's raw PCM path: 16-bit little-endian mono, format given in headers."""
    body = body.model_copy(update={"response_format": "pcm", "stream_format": "audio"})
    speech = prepare(request.app.state.engine, request.app.state.models.get(), body)
    headers = {
        **STREAM_HEADERS,
        "X-PCM-Sample-Rate": str(speech.encoder.rate),
        "X-PCM-Bit-Depth": "16",
        "X-PCM-Channels": "1",
    }
    return StreamingResponse(speech.audio(), media_type="audio/pcm", headers=headers)
