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

ASSISTANT_HEAD = "<|im_start|>assistant\n"
ASSISTANT_TAIL = "<|im_end|>\n" + ASSISTANT_HEAD


@dataclass(frozen=True)
class VoiceRequest:
    """What to say and how, at the model level."""

    text: str
    language: str = "auto"
    speaker: str | None = None
    instruct: str | None = None
    whole_text: bool = True  # the official default (`non_streaming_mode=True`)


@dataclass
class TalkerPrompt:
    """Prompt embeddings for one row: run `prefill` (T, hidden) at once, then add `trailing[i]` to the
    input of decode step i (and `pad` once `trailing` is used up)."""

    prefill: torch.Tensor
    trailing: torch.Tensor
    pad: torch.Tensor
    text_tokens: int


class PromptBuilder:
    def __init__(self, config: TTSConfig, tokenizer: TextTokenizer, talker: Talker):
        self.config = config
        self.tokenizer = tokenizer
        self.talker = talker
        self.head_ids = tokenizer.encode(ASSISTANT_HEAD)
        self.tail_ids = tokenizer.encode(ASSISTANT_TAIL)

    @property
    def languages(self) -> list[str]:
        return ["auto"] + [name for name in self.config.talker.codec_language_id if "dialect" not in name]

    @property
    def speakers(self) -> list[str]:
        return list(self.config.talker.spk_id)

    def text_ids(self, text: str) -> list[int]:
        """Token ids of the text between the fixed assistant head and tail."""
        ids = self.tokenizer.encode(f"{ASSISTANT_HEAD}{text}{ASSISTANT_TAIL}")
        head, tail = len(self.head_ids), len(self.tail_ids)
        if ids[:head] != self.head_ids or ids[-tail:] != self.tail_ids or len(ids) <= head + tail:
            raise InvalidInputError("text could not be tokenized between the prompt markers", param="text")
        return ids[head:-tail]

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
        if cfg.model_type == "base":
            raise InvalidInputError(
                "a base model clones a voice from reference audio; give a voice prompt", param="voice"
            )
        return VoiceRequest(
            text=text, language=language, speaker=speaker, instruct=instruct, whole_text=request.whole_text
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
        if request.whole_text:
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
