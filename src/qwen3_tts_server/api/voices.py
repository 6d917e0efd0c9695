"""The voices: GET /v1/audio/voices (presets, aliases, library) and the voice library's
POST /v1/audio/voices, GET and DELETE /v1/audio/voices/{voice_id}."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, UploadFile

from ..errors import InvalidInputError, PayloadTooLargeError
from ..service.cloning import parse_mode
from ..service.voices import OPENAI_VOICES, preset_voices
from .schemas import MAX_UPLOAD_BYTES, VoiceUploadForm

router = APIRouter()


async def read_upload(upload: UploadFile, param: str) -> bytes:
    """The uploaded file's bytes, refused when over the size limit or empty."""
    data = await upload.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise PayloadTooLargeError(f"{param} is larger than the {MAX_UPLOAD_BYTES >> 20} MiB limit", param=param)
    if not data:
        raise InvalidInputError(f"{param} is empty", param=param)
    return data


@router.get("/v1/audio/voices")
async def list_voices(request: Request) -> dict:
    speech = request.app.state.speech
    model = speech.models.get()
    voices = [{"id": name, "name": name, "type": "preset"} for name in model.speakers]
    voices += [
        {"id": alias, "name": alias, "type": "alias", "alias_of": target}
        for alias, target in sorted(preset_voices(model).items())
        if alias in OPENAI_VOICES
    ]
    voices += [voice.public() for voice in speech.library.list()]
    return {"object": "list", "data": voices}


@router.post("/v1/audio/voices")
async def create_voice(form: Annotated[VoiceUploadForm, Form()], request: Request) -> dict:
    speech = request.app.state.speech
    if form.type == "prompt":
        if not (form.prompt or "").strip():
            raise InvalidInputError("a voice of type prompt needs `prompt`, a description of the voice", "prompt")
        return speech.library.add(form.name, description=form.prompt.strip(), consent=form.consent).public()
    if form.audio_sample is None:
        raise InvalidInputError("`audio_sample`, the recording to clone, is required", param="audio_sample")
    audio = await read_upload(form.audio_sample, "audio_sample")
    mode = parse_mode(form.mode, form.ref_text)
    prompt = await speech.cloner.prompt(speech.models.get(), audio, form.ref_text, mode, field="audio_sample")
    return speech.library.add(form.name, prompt, consent=form.consent).public()


@router.get("/v1/audio/voices/{voice_id}")
async def get_voice(voice_id: str, request: Request) -> dict:
    return request.app.state.speech.library.get(voice_id).public()


@router.delete("/v1/audio/voices/{voice_id}")
async def delete_voice(voice_id: str, request: Request) -> dict:
    voice = request.app.state.speech.library.delete(voice_id)
    return {"object": "audio.voice.deleted", "id": voice.id, "deleted": True}
