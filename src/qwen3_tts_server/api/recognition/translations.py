"""POST /v1/audio/translations: Qwen3-ASR transcribes but does not translate, so with a translation model configured
(TRANSLATE_BASE_URL, TRANSLATE_MODEL) the recording is transcribed, then its text translated by that model, into
English as OpenAI's route does, or into the earlier ASR server's target `language`; without one, a 501 that says
what to set. `usage` is the recording's duration, as for transcriptions."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Form, UploadFile
from fastapi.responses import PlainTextResponse, Response

from ...engine.jobs import RequestClock
from ...errors import InvalidInputError, shown
from ...model.asr.languages import language_code, resolve_language
from ...service.recognition.routing import route_recognizer
from ...service.recognition.transcription import TranscriptionRequest
from ..dependencies import ServicesDep
from ..schemas import answers
from ..uploads import read_upload
from .transcriptions import check_options, cut_header, usage_of

router = APIRouter()
FORMATS = ("json", "text", "verbose_json")


@router.post(
    "/v1/audio/translations",
    response_class=Response,
    responses=answers("The translation: JSON, or text with `response_format` `text`", "application/json", "text/plain"),
)
async def create_translation(
    services: ServicesDep,
    file: Annotated[UploadFile, Form()],
    model: Annotated[str | None, Form()] = None,
    prompt: Annotated[str, Form()] = "",
    response_format: Annotated[str, Form()] = "json",
    temperature: Annotated[float, Form()] = 0.0,
    language: Annotated[str | None, Form()] = None,  # the earlier ASR server's target language (default English)
) -> Response:
    services.translator.check()
    if response_format not in FORMATS:
        raise InvalidInputError(
            f"translations answer as {', '.join(FORMATS)}, not {shown(response_format)}", param="response_format"
        )
    check_options(response_format, temperature, [], [], False)
    target = resolve_language(language) or "English"
    hosted = route_recognizer(services.registry, model)
    audio = await read_upload(file, "file", services.settings.max_transcription_bytes)
    request = TranscriptionRequest(audio, None, prompt, temperature=temperature)
    clock = RequestClock(services.settings.request_timeout)  # one limit for decoding, transcription and translation
    transcript = await services.recognition[hosted.id].transcribe(request, clock)
    text = await services.translator.translate(transcript.text, target, prompt, clock)
    if response_format == "text":
        return PlainTextResponse(text + "\n", headers=cut_header(transcript))
    body: dict = {"text": text, "language": language_code(target) or target}
    if response_format == "verbose_json":
        body = {"task": "translate", "language": target.lower(), "duration": round(transcript.seconds, 3), "text": text}
    return Response(
        json.dumps(body | {"usage": usage_of(transcript)}, ensure_ascii=False),
        media_type="application/json",
        headers=cut_header(transcript),
    )
