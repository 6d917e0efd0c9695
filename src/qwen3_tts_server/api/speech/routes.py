"""POST /v1/audio/speech (streamed audio in every format, SSE, or the whole file at once), the inline-clone
route /v1/audio/speech/clone, and the earlier server's /v1/audio/speech/stream and /stream/pcm."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response, StreamingResponse

from ...audio.encoding import FORMATS
from ...errors import InvalidInputError, TTSError, error_body
from ...service.recognition.subtitles import subtitle_cues, to_srt, to_webvtt
from ...service.speech.alignment import TimedSegment
from ...service.speech.stream import SpeechOutput
from ...service.speech.synthesis import SpeechService
from ..context import RequestContext
from ..dependencies import ContextDep
from ..schemas import answers
from ..uploads import read_upload
from .dependencies import SpeechServiceDep
from .schemas import CaptionedSpeechRequest, CloneSpeechForm, SpeechOptions, SpeechRequest

router = APIRouter()


AUDIO_TYPES = list(dict.fromkeys(audio.media_type for audio in FORMATS.values()))
SPEECH_ANSWERS = answers(
    'Speech in the `response_format`\'s media type, streamed while it is made (whole with `"stream": false`), '
    "or with `stream_format` `sse` as server-sent events",
    *AUDIO_TYPES,
    "text/event-stream",
)
STREAM_HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}
CLIENT_CLOSED_REQUEST = 499  # the status logged for a whole-file request whose client left (nginx's code)


async def speak(service: SpeechService, context: RequestContext, body: SpeechRequest) -> SpeechOutput:
    """The body's audio, its particulars handed to the request log and the metrics (api/observability.py)."""
    check_timestamps(body)
    speech = await service.speak(body.synthesis())
    context.record_speech(speech, body.voice_name or "default", body.format_name, len(body.input))
    return speech


def check_timestamps(body: SpeechOptions) -> None:
    """Word timestamps travel as events: beside plain audio there is nowhere to put them."""
    if body.timestamps and body.stream_format != "sse":
        raise InvalidInputError(
            "timestamps come as speech.words events: ask for stream_format sse (or POST /dev/captioned_speech)",
            param="timestamps",
        )


async def respond(request: Request, speech: SpeechOutput, body: SpeechOptions) -> Response:
    headers = speech.text_headers(body.include_text)
    if body.stream_format == "sse":
        events = speech.sse(body.include_text)
        return StreamingResponse(events, media_type="text/event-stream", headers={**STREAM_HEADERS, **headers})
    if body.stream:
        audio = await started_audio(speech)
        return StreamingResponse(audio, media_type=speech.media_type, headers={**STREAM_HEADERS, **headers})
    content = await _whole(request, speech)
    if content is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return Response(content, media_type=speech.media_type, headers={**headers, **speech.result_headers()})


async def started_audio(speech: SpeechOutput) -> AsyncIterator[bytes]:
    """`speech.audio()` once its first piece is made: a failure before any audio (a prefill that failed, out of
    memory) is raised here, while the status can still say so, instead of a 200 cut short."""
    parts = speech.audio()
    first = await anext(parts, b"")

    async def audio() -> AsyncIterator[bytes]:
        try:
            yield first
            async for part in parts:
                yield part
        finally:
            await parts.aclose()

    return audio()


async def _whole(request: Request, speech: SpeechOutput) -> bytes | None:
    """The whole file, or None when the client leaves first: its engine rows are freed at once."""

    async def client_left() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    audio, left = asyncio.ensure_future(speech.whole()), asyncio.ensure_future(client_left())
    try:
        await asyncio.wait({audio, left}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (audio, left):
            task.cancel()
        await speech.aclose()
    return audio.result() if audio.done() and not audio.cancelled() else None


@router.post("/v1/audio/speech", response_class=Response, responses=SPEECH_ANSWERS)
async def create_speech(body: SpeechRequest, request: Request, service: SpeechServiceDep, context: ContextDep):
    speech = await speak(service, context, body)
    return await respond(request, speech, body)


@router.post("/v1/audio/speech/clone", response_class=Response, responses=SPEECH_ANSWERS)
async def clone_speech(
    form: Annotated[CloneSpeechForm, Form()], request: Request, service: SpeechServiceDep, context: ContextDep
):
    """Speech in a voice cloned from the uploaded reference; the clone prompt is cached by content hash."""
    check_timestamps(form)
    upload, field = form.recording()
    audio = await read_upload(upload, field)
    speech = await service.clone_and_speak(form.synthesis(), audio, form.ref_text, form.mode, field)
    context.record_speech(speech, "clone", form.format_name, len(form.input))
    return await respond(request, speech, form)


@router.post(
    "/v1/audio/speech/stream",
    response_class=Response,
    responses=answers("Base64 lines of 16-bit PCM, then `[DONE]`", "text/event-stream"),
)
async def stream_speech_sse(body: SpeechRequest, service: SpeechServiceDep, context: ContextDep):
    """The earlier server's SSE path, as its clients read it: each `data:` line is the base64 of raw 16-bit PCM,
    then `data: [DONE]` (OpenAI-shaped events are POST /v1/audio/speech with stream_format=sse). A failure after
    the first line is an `event: error` whose data is the error envelope, and no [DONE]."""
    body = body.model_copy(update={"response_format": "pcm", "stream_format": "audio"})
    speech = await speak(service, context, body)

    async def events():
        try:
            async for pcm in speech.audio():
                yield b"data: " + base64.b64encode(pcm) + b"\n\n"
        except TTSError as exc:
            yield b"event: error\ndata: " + json.dumps({"error": error_body(exc)}).encode() + b"\n\n"
            return
        yield b"data: [DONE]\n\n"

    headers = {**STREAM_HEADERS, **speech.text_headers(body.include_text)}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


@router.post(
    "/v1/audio/speech/stream/pcm",
    response_class=Response,
    responses=answers("16-bit little-endian mono PCM, its rate in `X-PCM-Sample-Rate`", "audio/pcm"),
)
async def stream_speech_pcm(body: SpeechRequest, service: SpeechServiceDep, context: ContextDep):
    """The earlier server's raw PCM path: 16-bit little-endian mono, format given in headers."""
    body = body.model_copy(update={"response_format": "pcm", "stream_format": "audio"})
    speech = await speak(service, context, body)
    headers = {
        **STREAM_HEADERS,
        **speech.text_headers(body.include_text),
        "X-PCM-Sample-Rate": str(speech.sample_rate),
        "X-PCM-Bit-Depth": "16",
        "X-PCM-Channels": "1",
    }
    return StreamingResponse(await started_audio(speech), media_type="audio/pcm", headers=headers)


@router.post(
    "/dev/captioned_speech",
    response_class=Response,
    responses=answers("base64 audio with its words' times; streamed, a JSON line per piece", "application/json"),
)
async def captioned_speech(body: CaptionedSpeechRequest, service: SpeechServiceDep, context: ContextDep):
    """Kokoro-FastAPI's captioned speech: `{"audio", "audio_format", "timestamps": [{"word", "start_time",
    "end_time"}]}`, times in seconds from the start of the request's audio. Streamed, each line holds a piece of
    one encoded file (join the pieces in order) and the words timed by then; the words of the last segment follow
    the audio on a line of their own. Whole, `subtitles` (srt or vtt) adds the words as subtitles."""
    if body.subtitles and (body.stream or not body.return_timestamps):
        raise InvalidInputError("subtitles come with a whole answer with its timestamps: stream false", "subtitles")
    speech = await service.speak(body.synthesis())
    context.record_speech(speech, body.voice_name or "default", body.format_name, len(body.input))
    headers = speech.text_headers(body.include_text)

    def line(audio: bytes, timed: list[TimedSegment]) -> dict:
        words = [word for segment in timed for word in segment.fields()["words"]]
        stamps = [{"word": w["word"], "start_time": w["start"], "end_time": w["end"]} for w in words]
        return {"audio": base64.b64encode(audio).decode(), "audio_format": speech.media_type, "timestamps": stamps}

    if not body.stream:
        pieces = [piece async for piece in speech.with_times()]
        audio = speech.as_file(b"".join(data for data, _ in pieces))
        timed = [segment for _, segment_times in pieces for segment in segment_times]
        whole = line(audio, timed)
        if body.subtitles:
            words = [word for segment in timed for word in segment.words]
            cues = subtitle_cues(body.input, words, duration=timed[-1].end if timed else None)
            whole["subtitles"] = to_srt(cues) if body.subtitles == "srt" else to_webvtt(cues)
        return Response(json.dumps(whole), media_type="application/json", headers=headers)

    async def lines() -> AsyncIterator[bytes]:
        try:
            async for data, timed in speech.with_times():
                yield json.dumps(line(data, timed)).encode() + b"\n"
        except TTSError as exc:  # the headers are sent: the error becomes a line
            yield json.dumps({"error": error_body(exc)}).encode() + b"\n"

    return StreamingResponse(lines(), media_type="application/json", headers={**STREAM_HEADERS, **headers})
