"""Clone prompts from uploaded reference audio, computed off the event loop and reused by content hash."""

from __future__ import annotations

import asyncio
import hashlib

from ...audio.reference import load_reference
from ...errors import InvalidInputError, shown
from ...model.tts.tts_model import Qwen3TTSModel
from ...model.tts.voice_cloning import CloneKey
from ...model.tts.voice_prompt import Mode, VoicePrompt
from .voice_library import PromptCache

MODE_NAMES: dict[str, Mode] = {
    "x_vector": "x_vector",
    "x-vector": "x_vector",
    "in_context": "in_context",
    "in-context": "in_context",
}


def parse_mode(mode: str | None, ref_text: str | None) -> Mode:
    """The cloning mode a request asks for; by default in-context when a transcript is given, else x-vector."""
    if mode is None or not mode.strip():
        return "in_context" if (ref_text or "").strip() else "x_vector"
    try:
        return MODE_NAMES[mode.strip().lower()]
    except KeyError:
        raise InvalidInputError(f"unknown mode {shown(mode)}; use x_vector or in_context", param="mode") from None


class VoiceCloner:
    def __init__(self, cache: PromptCache):
        self.cache = cache
        # One clone at a time: encoders beside the engine thread, not a pile of them starving it.
        self._busy = asyncio.Lock()

    async def prompt(
        self, model: Qwen3TTSModel, audio: bytes, ref_text: str | None, mode: str | None, field: str = "audio"
    ) -> VoicePrompt:
        """The clone prompt of `audio` (any common format) with transcript `ref_text` in `mode` (a name as
        `parse_mode` reads it): cached, or computed. Errors about the audio name `field`, its form field."""
        x_vector_only = parse_mode(mode, ref_text) == "x_vector"
        key = model.voice_encoder.prompt_key(hashlib.sha256(audio).hexdigest(), ref_text, x_vector_only)
        prompt = self.cache.get(key.prompt_id)
        if prompt is not None:
            return prompt
        async with self._busy:
            prompt = self.cache.get(key.prompt_id, count=False)  # a request just before this one may have made it
            if prompt is None:
                prompt = await asyncio.to_thread(_clone, model, audio, key, field)
                self.cache.put(prompt)
        return prompt


def _clone(model: Qwen3TTSModel, audio: bytes, key: CloneKey, field: str) -> VoicePrompt:
    try:
        reference = load_reference(audio)
    except InvalidInputError as exc:
        exc.param = field
        raise
    return model.voice_encoder.encode(reference, key=key)
