"""Cloning a voice from reference audio (Base models): the speaker embedding and, in in-context mode, the
reference's codec codes and its transcript, as a `VoicePrompt` identified by content."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ...errors import InvalidInputError
from .codec_encoder import CodecEncoder
from .prompt import PromptBuilder
from .speaker_encoder import SpeakerEncoder
from .voice_prompt import Mode, VoicePrompt, voice_prompt_id

if TYPE_CHECKING:  # only the type: the model layer does no audio I/O
    from ...audio.reference import ReferenceAudio

# Characters of a reference's transcript, as of any text spoken (`input`): it joins the prompt of every request that
# speaks the voice, so its length costs each of them (1 MB cost some 1 GB of memory a request).
MAX_REF_TEXT = 4096


@dataclass(frozen=True)
class CloneKey:
    """What identifies the voice prompt that a reference will give, known before the audio is decoded."""

    prompt_id: str
    mode: Mode
    ref_text: str | None  # the transcript, cleaned


class VoiceEncoder:
    def __init__(
        self,
        speaker_encoder: SpeakerEncoder | None,
        codec_encoder: CodecEncoder | None,
        prompts: PromptBuilder,
        device: torch.device,
        model_type: str,
    ):
        self.speaker_encoder = speaker_encoder
        self.codec_encoder = codec_encoder
        self.prompts = prompts
        self.device = device
        self.model_type = model_type

    def prompt_key(self, audio_sha256: str, ref_text: str | None, x_vector_only: bool) -> CloneKey:
        """The key of the voice prompt that reference audio with this SHA-256 would give: a cache can be
        consulted before the audio is decoded."""
        if self.speaker_encoder is None or self.codec_encoder is None:
            raise InvalidInputError(
                f"voice cloning needs a Base checkpoint (Qwen3-TTS-12Hz-*-Base); this is a {self.model_type} model",
                param="model",
            )
        ref_text = (ref_text or "").strip() or None
        if ref_text is not None and len(ref_text) > MAX_REF_TEXT:
            raise InvalidInputError(
                f"ref_text is too long: {len(ref_text)} characters, at most {MAX_REF_TEXT} (the transcript of a few "
                "seconds of reference audio)",
                param="ref_text",
            )
        if not x_vector_only and ref_text is None:
            raise InvalidInputError(
                "in-context cloning needs ref_text, the transcript of the reference audio "
                "(or use x-vector-only mode, which needs none)",
                param="ref_text",
            )
        mode: Mode = "x_vector" if x_vector_only else "in_context"
        return CloneKey(voice_prompt_id(audio_sha256, ref_text, mode, self.prompts.checkpoint), mode, ref_text)

    @torch.inference_mode()
    def encode(
        self,
        reference: ReferenceAudio,
        ref_text: str | None = None,
        x_vector_only: bool = False,
        key: CloneKey | None = None,
    ) -> VoicePrompt:
        """Clone a voice from reference audio: the speaker embedding, plus in in-context mode (the default)
        the reference's codec codes and its transcript `ref_text` with its prompt tokens. `key`: the
        reference's `prompt_key`, when the caller has it already."""
        if key is None:
            key = self.prompt_key(reference.sha256, ref_text, x_vector_only)
        prompt_id, mode, ref_text = key.prompt_id, key.mode, key.ref_text
        samples = torch.from_numpy(reference.samples)
        # The mel front end runs on the CPU in float32, as the official one does; the encoder on the device.
        embedding = self.speaker_encoder.embed(samples).float().cpu()
        in_context = mode == "in_context"
        codes = self.codec_encoder.encode(samples[None].to(self.device))[0].cpu() if in_context else None
        return VoicePrompt(
            id=prompt_id,
            mode=mode,
            checkpoint=self.prompts.checkpoint,
            speaker_embedding=embedding,
            ref_codes=codes,
            ref_text=ref_text if in_context else None,
            ref_text_ids=self.prompts.reference_ids(ref_text) if in_context else None,
        )
