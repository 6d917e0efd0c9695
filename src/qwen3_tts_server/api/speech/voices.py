"""The voices: GET /v1/audio/voices (presets, aliases, library) and the voice library's
POST /v1/audio/voices, GET and DELETE /v1/audio/voices/{voice_id}."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form

from ...errors import InvalidInputError
from ..uploads import read_upload
from .dependencies import VoiceServiceDep
from .schemas import VoiceUploadForm

router = APIRouter()


@router.get("/v1/audio/voices")
async def list_voices(voices: VoiceServiceDep) -> dict:
    """Every voice (`data`); `voices` again as `{id, name}` pairs, the list Open WebUI's voice picker reads."""
    listed = await voices.list_voices()
    return {
        "object": "list",
        "data": listed,
        "voices": [{"id": voice["id"], "name": voice["name"]} for voice in listed],
    }


@router.post("/v1/audio/voices")
async def create_voice(form: Annotated[VoiceUploadForm, Form()], voices: VoiceServiceDep) -> dict:
    if form.type == "prompt":
        voice = await voices.create_from_description(form.name, form.prompt, form.consent)
        return voice.public()
    if form.audio_sample is None:
        raise InvalidInputError("`audio_sample`, the recording to clone, is required", param="audio_sample")
    audio = await read_upload(form.audio_sample, "audio_sample")
    voice = await voices.create_from_sample(form.name, audio, form.ref_text, form.mode, form.consent, form.model)
    return voice.public()


@router.get("/v1/audio/voices/{voice_id}")
async def get_voice(voice_id: str, voices: VoiceServiceDep) -> dict:
    return voices.get(voice_id).public()


@router.delete("/v1/audio/voices/{voice_id}")
async def delete_voice(voice_id: str, voices: VoiceServiceDep) -> dict:
    voice = await voices.delete(voice_id)
    return {"object": "audio.voice.deleted", "id": voice.id, "deleted": True}
