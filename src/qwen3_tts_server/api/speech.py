"""POST /v1/audio/speech (streamed audio in every format, SSE, or the whole file at once), the inline-clone
route /v1/audio/speech/clone, and the earlier server's /v1/audio/speech/stream and /stream/pcm."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response, StreamingResponse

from ..model.voice_prompt import VoicePrompt
from ..service.cloning import parse_mode
from ..service.speech_stream import SpeechOutput
from .schemas import CloneSpeechForm, SpeechRequest
from .voices import read_upload

router = APIRouter()
STREAM_HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}


async def prepare(request: Request, body: SpeechRequest, clone: VoicePrompt | None = None) -> SpeechOutput:
    """The request's audio, prepared, and its particulars handed to the request log and the metrics
    (api/observability.py)."""
    speech = await request.app.state.speech.prepare(body, clone)
    request.state.speech = speech
    request.state.voice = body.voice_name
    request.state.format = body.response_format
    request.state.characters = len(body.input)
    return speech


async def respond(speech: SpeechOutput, body: SpeechRequest) -> Response:
    headers = speech.text_headers(body.include_text)
    if body.stream_format == "sse":
        events = speech.sse(body.include_text)
        return StreamingResponse(events, media_type="text/event-stream", headers={**STREAM_HEADERS, **headers})
    if body.stream:
        return StreamingResponse(speech.audio(), media_type=speech.media_type, headers={**STREAM_HEADERS, **headers})
    content = b"".join([part async for part in speech.audio()])
    return Response(content, media_type=speech.media_type, headers={**headers, **speech.result_headers()})


@router.post("/v1/audio/speech")
async def create_speech(body: SpeechRequest, request: Request) -> Response:
    speech = await prepare(request, body)
    return await respond(speech, body)


@router.post("/v1/audio/speech/clone")
async def clone_speech(form: Annotated[CloneSpeechForm, Form()], request: Request) -> Response:
    """Speech in a voice cloned from the uploaded reference; the clone prompt is cached by content hash."""
    service = request.app.state.speech
    body = form.speech_request()
    audio = await read_upload(form.ref_audio, "ref_audio")
    mode = parse_mode(form.mode, form.ref_text)
    clone = await service.cloner.prompt(service.models.get(), audio, form.ref_text, mode, field="ref_audio")
    speech = await prepare(request, body, clone)
    return await respond(speech, body)


@router.post("/v1/audio/speech/stream")
async def stream_speech_sse(body: SpeechRequest, request: Request) -> Response:
    """The earlier server's SSE path: base64 16-bit PCM deltas, the done event, then `data: [DONE]`."""
    body = body.model_copy(update={"response_format": "pcm", "stream_format": "sse"})
    speech = await prepare(request, body)

    async def events():
        async for event in speech.sse(body.include_text):
            yield event
        yield b"data: [DONE]\n\n"

    headers = {**STREAM_HEADERS, **speech.text_headers(body.include_text)}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


@router.post("/v1/audio/speech/stream/pcm")
async def stream_speech_pcm(body: SpeechRequest, request: Request) -> Response:
    """The earlier server's raw PCM path: 16-bit little-endian mono, format given in headers."""
    body = body.model_copy(update={"response_format": "pcm", "stream_format": "audio"})
    speech = await prepare(request, body)
    headers = {
        **STREAM_HEADERS,
        **speech.text_headers(body.include_text),
        "X-PCM-Sample-Rate": str(speech.sample_rate),
        "X-PCM-Bit-Depth": "16",
        "X-PCM-Channels": "1",
    }
    return StreamingResponse(speech.audio(), media_type="audio/pcm", headers=headers)
