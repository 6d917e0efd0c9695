"""ElevenLabs' speech routes, for clients that speak ElevenLabs (LiveKit's and Pipecat's plugins with their base URL
set to this server): the multi-context WebSocket (protocol in service/speech/elevenlabs.py) and the streamed HTTP
speech LiveKit's `synthesize()` posts. The key is taken from `xi-api-key` as from `Authorization`."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from ...errors import InvalidInputError, TTSError, checked, error_body
from ...service.speech.elevenlabs import MAX_INACTIVITY_TIMEOUT, ElevenLabsSocket, OutputFormat, error_message
from ...service.speech.elevenlabs import output_format as parse_output_format
from ...service.speech.realtime import ChannelClosed
from ...service.speech.requests import language_of_code
from ..dependencies import ServicesDep
from ..websockets import accepted, close_quietly
from .realtime import SocketChannel, parse_request
from .routes import STREAM_HEADERS, started_audio

router = APIRouter()
NORMALIZATION = {"auto": None, "on": True, "off": False}
DEFAULT_FORMAT = "mp3_44100_128"  # ElevenLabs' own default


class SocketOptions(BaseModel):
    """The socket's query values that are not plain text, checked once it is accepted: FastAPI's own check of a
    WebSocket's query refuses the handshake with a 403, which reads as a wrong key and says nothing."""

    sync_alignment: bool = False
    inactivity_timeout: float = Field(20.0, gt=0, le=MAX_INACTIVITY_TIMEOUT, allow_inf_nan=False)


def request_fields(
    voice_id: str, model_id: str | None, fmt: OutputFormat, normalization: str | None, language_code: str | None
) -> dict[str, Any]:
    """ElevenLabs' parameters as our speech request's fields."""
    if normalization not in (None, *NORMALIZATION):
        raise InvalidInputError("apply_text_normalization is auto, on or off", param="apply_text_normalization")
    return {
        "voice": voice_id,
        "model": model_id,
        "response_format": fmt.response_format,
        "sample_rate": fmt.sample_rate,
        "normalize": NORMALIZATION.get(normalization or "auto"),
        "language": language_of_code(language_code, "language_code") if language_code else None,
    }


@router.websocket("/v1/text-to-speech/{voice_id}/multi-stream-input")
async def multi_stream_input(
    websocket: WebSocket,
    voice_id: str,
    services: ServicesDep,
    model_id: str | None = None,
    output_format: str = DEFAULT_FORMAT,
    apply_text_normalization: str | None = None,
    language_code: str | None = None,
) -> None:
    if not await accepted(websocket, services.settings.accepted_keys()):
        return
    send = SocketChannel(websocket).send_event
    try:
        options = checked(SocketOptions, dict(websocket.query_params))
        fmt = parse_output_format(output_format)
        config = request_fields(voice_id, model_id, fmt, apply_text_normalization, language_code)
        config["timestamps"] = services.speech.aligner is not None
        await services.speech.check(parse_request(config, "probe"))
    except TTSError as exc:  # refused before any context: said, then closed
        with suppress(ChannelClosed):
            await send(error_message(error_body(exc), None))
        await close_quietly(websocket, 1008, str(exc))
        return
    limit = services.settings.max_pending_text
    socket = ElevenLabsSocket(services.speech, send, parse_request, config, fmt, options.sync_alignment, limit)
    receiving: asyncio.Task | None = None
    try:
        while True:
            receiving = receiving or asyncio.ensure_future(websocket.receive())
            done, _ = await asyncio.wait([receiving], timeout=options.inactivity_timeout)
            if not done:
                if socket.contexts:  # speaking still: silence is the client listening
                    continue
                break  # silent past inactivity_timeout with nothing to say: closed, as ElevenLabs closes it
            message, receiving = receiving.result(), None
            if message["type"] == "websocket.disconnect" or not await socket.handle(message.get("text")):
                break
    except (WebSocketDisconnect, ChannelClosed):  # gone while we answered
        pass
    finally:
        if receiving is not None:
            receiving.cancel()
        await socket.aclose()
    await close_quietly(websocket)


class TextToSpeechBody(BaseModel):
    text: str
    model_id: str | None = None
    language_code: str | None = None
    apply_text_normalization: str | None = None
    voice_settings: dict[str, Any] | None = None


@router.post("/v1/text-to-speech/{voice_id}/stream")
@router.post("/v1/text-to-speech/{voice_id}")
async def text_to_speech(
    voice_id: str,
    body: TextToSpeechBody,
    services: ServicesDep,
    output_format: str = Query(DEFAULT_FORMAT),
):
    """ElevenLabs' speech over HTTP: the text's audio in `output_format`, streamed."""
    fmt = parse_output_format(output_format)
    fields = request_fields(voice_id, body.model_id, fmt, body.apply_text_normalization, body.language_code)
    speed = (body.voice_settings or {}).get("speed")
    fields |= {"response_format": "mp3" if fmt.mp3 else fmt.response_format} | ({"speed": speed} if speed else {})
    speech = await services.speech.speak(parse_request(fields, body.text))
    media_type = "audio/mpeg" if fmt.mp3 else speech.media_type
    return StreamingResponse(await started_audio(speech), media_type=media_type, headers=STREAM_HEADERS)
