"""Turning a request (text, speaker or instruction, language) into the talker's prompt embeddings.

The layout is the official one:
  [instruction tokens] <|im_start|>assistant\\n
  codec tags (think/nothink, think_bos, [language], think_eos) [+ speaker] + pad, each under tts_pad
  (the last under tts_bos), then either
  - whole-text mode: every text token + tts_eos over codec_pad, then tts_pad over codec_bos; the text
    stream is exhausted, so every step adds tts_pad;
  - streaming-text mode: the first text token over codec_bos; the remaining text tokens and tts_eos are
    fed one per generated frame, then tts_pad.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import InvalidInputError
from .config import TTSConfig
from .talker import Talker
from .text_tokenizer import TextTokenizer
from .voice_prompt import VoicePrompt

ASSISTANT_HEAD = "<|im_start|>assistant\n"
ASSISTANT_TAIL = "<|im_end|>\n" + ASSISTANT_HEAD
REFERENCE_TAIL = "<|im_end|>\n"


@dataclass(frozen=True)
class VoiceRequest:
    """What to say and how, at the model level."""

    text: str
    language: str = "auto"
    speaker: str | None = None
    instruct: str | None = None
    voice: VoicePrompt | None = None  # a cloned voice (Base models)
    # Whole text in the prompt, or fed one token per frame. None takes the official default of the model
    # type: whole text for CustomVoice and VoiceDesign, streamed for voice cloning.
    whole_text: bool | None = None


@dataclass
class TalkerPrompt:
    """Prompt embeddings for one row: run `prefill` (T, hidden) at once, then add `trailing[i]` to the
    input of decode step i (and `pad` once `trailing` is used up)."""

    prefill: torch.Tensor
    trailing: torch.Tensor
    pad: torch.Tensor
    text_tokens: int


class PromptBuilder:
    def __init__(self, config: TTSConfig, tokenizer: TextTokenizer, talker: Talker, checkpoint: str):
        self.config = config
        self.tokenizer = tokenizer
        self.talker = talker
        self.checkpoint = checkpoint  # fingerprint that voice prompts must carry
        self.head_ids = tokenizer.encode(ASSISTANT_HEAD)
        self.tail_ids = tokenizer.encode(ASSISTANT_TAIL)
        self.reference_tail_ids = tokenizer.encode(REFERENCE_TAIL)

    @property
    def languages(self) -> list[str]:
        return ["auto"] + [name for name in self.config.talker.codec_language_id if "dialect" not in name]

    @property
    def speakers(self) -> list[str]:
        return list(self.config.talker.spk_id)

    def text_ids(self, text: str, tail: str = ASSISTANT_TAIL) -> list[int]:
        """Token ids of the text between the fixed assistant head and a tail (the official prompt is
        tokenised whole, then sliced)."""
        tail_ids = self.tail_ids if tail == ASSISTANT_TAIL else self.reference_tail_ids
        ids = self.tokenizer.encode(f"{ASSISTANT_HEAD}{text}{tail}")
        head, n_tail = len(self.head_ids), len(tail_ids)
        if ids[:head] != self.head_ids or ids[-n_tail:] != tail_ids or len(ids) <= head + n_tail:
            raise InvalidInputError("text could not be tokenized between the prompt markers", param="text")
        return ids[head:-n_tail]

    def validate(self, request: VoiceRequest) -> VoiceRequest:
        """Check a request against this model; return it with the text stripped and names lower-cased."""
        cfg = self.config
        text = request.text.strip()
        if not text:
            raise InvalidInputError("text is empty", param="text")
        language = (request.language or "auto").lower()
        if language not in self.languages:
            raise InvalidInputError(
                f"unknown language {request.language!r}; valid languages: {', '.join(self.languages)}",
                param="language",
            )
        speaker = request.speaker.lower() if request.speaker else None
        if cfg.model_type == "custom_voice":
            if speaker is None or speaker not in cfg.talker.spk_id:
                what = f"unknown speaker {request.speaker!r}" if speaker else "a speaker is required"
                raise InvalidInputError(f"{what}; valid speakers: {', '.join(self.speakers)}", param="speaker")
        elif speaker is not None:
            raise InvalidInputError(
                f"a {cfg.model_type} model has no preset speakers; drop the speaker", param="speaker"
            )
        instruct = (request.instruct or "").strip() or None
        if cfg.model_type == "voice_design" and instruct is None:
            raise InvalidInputError("a voice_design model needs an instruction describing the voice", param="instruct")
        if instruct is not None and not cfg.accepts_instruct:
            raise InvalidInputError(
                f"this {cfg.model_type} model (size {cfg.model_size or 'unknown'}) does not take an instruction",
                param="instruct",
            )
        voice = request.voice
        if cfg.model_type == "base":
            if voice is None:
                raise InvalidInputError(
                    "a base model clones a voice from reference audio; give a voice prompt", param="voice"
                )
            if voice.checkpoint != self.checkpoint:
                raise InvalidInputError(
                    f"voice prompt {voice.id} was built with another checkpoint; build it again with this one",
                    param="voice",
                )
        elif voice is not None:
            raise InvalidInputError(
                f"cloned voices need a base checkpoint; this is a {cfg.model_type} model", param="voice"
            )
        whole_text = request.whole_text if request.whole_text is not None else cfg.model_type != "base"
        return VoiceRequest(
            text=text, language=language, speaker=speaker, instruct=instruct, voice=voice, whole_text=whole_text
        )

    def _language_id(self, request: VoiceRequest) -> int | None:
        talker = self.config.talker
        if request.speaker is not None and request.language in ("chinese", "auto"):
            dialect = talker.spk_is_dialect.get(request.speaker)
            if dialect:
                return talker.codec_language_id[dialect]
        return None if request.language == "auto" else talker.codec_language_id[request.language]

    @torch.inference_mode()
    def build(self, request: VoiceRequest) -> TalkerPrompt:
        request = self.validate(request)
        cfg, talker = self.config, self.talker
        tc = cfg.talker
        device = talker.codec_head.weight.device

        def ids(values: list[int]) -> torch.Tensor:
            return torch.tensor([values], dtype=torch.long, device=device)

        text_ids = self.text_ids(request.text)
        tts_bos, tts_eos, tts_pad = talker.embed_text(
            ids([cfg.tts_bos_token_id, cfg.tts_eos_token_id, cfg.tts_pad_token_id])
        ).chunk(3, dim=1)

        language_id = self._language_id(request)
        if language_id is None:
            tags = [tc.codec_nothink_id, tc.codec_think_bos_id, tc.codec_think_eos_id]
        else:
            tags = [tc.codec_think_id, tc.codec_think_bos_id, language_id, tc.codec_think_eos_id]
        codec_parts = [talker.embed_codec(ids(tags))]
        if request.speaker is not None:
            codec_parts.append(talker.embed_codec(ids([tc.spk_id[request.speaker]])))
        elif request.voice is not None:
            codec_parts.append(request.voice.speaker_embedding.to(device, tts_pad.dtype).view(1, 1, -1))
        codec_parts.append(talker.embed_codec(ids([tc.codec_pad_id, tc.codec_bos_id])))
        codec = torch.cat(codec_parts, dim=1)

        parts = []
        if request.instruct is not None:
            parts.append(
                talker.embed_text(ids(self.tokenizer.encode(f"<|im_start|>user\n{request.instruct}<|im_end|>\n")))
            )
        parts.append(talker.embed_text(ids(self.head_ids)))
        text_overlay = torch.cat((tts_pad.expand(-1, codec.shape[1] - 2, -1), tts_bos), dim=1)
        parts.append(text_overlay + codec[:, :-1])
        if request.voice is not None and request.voice.in_context:
            icl, trailing = self._in_context(request, text_ids, tts_eos, tts_pad)
            parts.append(icl)
        elif request.whole_text:
            text = torch.cat((talker.embed_text(ids(text_ids)), tts_eos), dim=1)
            parts.append(text + talker.embed_codec(ids([tc.codec_pad_id] * (len(text_ids) + 1))))
            parts.append(tts_pad + talker.embed_codec(ids([tc.codec_bos_id])))
            trailing = tts_pad[0, :0]
        else:
            parts.append(talker.embed_text(ids(text_ids[:1])) + codec[:, -1:])
            trailing = torch.cat((talker.embed_text(ids(text_ids[1:])), tts_eos), dim=1)[0]
        return TalkerPrompt(
            prefill=torch.cat(parts, dim=1)[0], trailing=trailing, pad=tts_pad[0, 0], text_tokens=len(text_ids)
        )

    def _in_context(
        self, request: VoiceRequest, text_ids: list[int], tts_eos: torch.Tensor, tts_pad: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """In-context cloning: the reference transcript then the new text, against codec_bos and the
        reference speech's frames. Returns (prompt part (1, T, H), trailing text (N, H))."""
        talker, tc = self.talker, self.config.talker
        device = tts_pad.device
        voice = request.voice
        ref_ids = self.text_ids(voice.ref_text, tail=REFERENCE_TAIL)
        both = torch.tensor([ref_ids + text_ids], dtype=torch.long, device=device)
        text = torch.cat((talker.embed_text(both), tts_eos), dim=1)
        bos = talker.embed_codec(torch.tensor([[tc.codec_bos_id]], device=device))
        speech = talker.frame_embedding(voice.ref_codes.to(device)).transpose(0, 1)
        codec = torch.cat((bos, speech), dim=1)
        if request.whole_text:
            pads = talker.embed_codec(torch.full((1, text.shape[1]), tc.codec_pad_id, device=device))
            return torch.cat((text + pads, codec + tts_pad), dim=1), tts_pad[0, :0]
        if text.shape[1] > codec.shape[1]:
            return text[:, : codec.shape[1]] + codec, text[0, codec.shape[1] :]
        padded = torch.cat((text, tts_pad.expand(-1, codec.shape[1] - text.shape[1], -1)), dim=1)
        return padded + codec, tts_pad[0, :0]
