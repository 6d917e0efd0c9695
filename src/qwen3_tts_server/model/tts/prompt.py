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

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ...errors import InvalidInputError, shown
from ..text_tokenizer import TextTokenizer
from .config import TTSConfig
from .talker import Talker
from .voice_prompt import VoicePrompt

ASSISTANT_HEAD = "<|im_start|>assistant\n"
ASSISTANT_TAIL = "<|im_end|>\n" + ASSISTANT_HEAD
REFERENCE_TAIL = "<|im_end|>\n"
INSTRUCTION = "<|im_start|>user\n{}<|im_end|>\n"


@dataclass(frozen=True)
class SpeechInput:
    """What to say and how, at the model level, before it is checked against a model."""

    text: str
    language: str = "auto"
    speaker: str | None = None
    instruct: str | None = None
    voice: VoicePrompt | None = None  # a cloned voice (Base models)
    # Whole text in the prompt, or fed one token per frame. None takes the official default of the model
    # type: whole text for CustomVoice and VoiceDesign, streamed for voice cloning.
    whole_text: bool | None = None


@dataclass(frozen=True)
class VoiceSpec:
    """The voice part of an input, checked against the model: the same for every segment of a request."""

    speaker: str | None
    instruct_ids: tuple[int, ...] | None  # the instruction's prompt tokens
    voice: VoicePrompt | None  # in-context voices carry their transcript's ids
    whole_text: bool


@dataclass(frozen=True)
class TokenizedInput:
    """One text checked and tokenized for a voice: what the engine embeds and prefills, nothing more."""

    text_ids: tuple[int, ...]
    language: str
    voice: VoiceSpec


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
        return self.config.languages

    @property
    def speakers(self) -> list[str]:
        return self.config.speakers

    def text_ids(self, text: str, tail: str = ASSISTANT_TAIL) -> tuple[int, ...]:
        """Token ids of the text between the fixed assistant head and a tail (the official prompt is
        tokenised whole, then sliced)."""
        tail_ids = self.tail_ids if tail == ASSISTANT_TAIL else self.reference_tail_ids
        ids = self.tokenizer.encode(f"{ASSISTANT_HEAD}{text}{tail}")
        head, n_tail = len(self.head_ids), len(tail_ids)
        if ids[:head] != self.head_ids or ids[-n_tail:] != tail_ids or len(ids) <= head + n_tail:
            raise InvalidInputError("text could not be tokenized between the prompt markers", param="text")
        return tuple(ids[head:-n_tail])

    def reference_ids(self, ref_text: str) -> tuple[int, ...]:
        """An in-context voice's transcript as it precedes the new text in the prompt."""
        return self.text_ids(ref_text, tail=REFERENCE_TAIL)

    def build(self, request: SpeechInput) -> TalkerPrompt:
        """The talker prompt of one input, checked, tokenized and embedded."""
        return self.embed(self.prepare(request))

    def prepare(self, request: SpeechInput) -> TokenizedInput:
        """Check one input against this model and tokenize it."""
        voice = self.check_voice(request.speaker, request.instruct, request.voice, request.whole_text)
        return self.tokenize(voice, request.text, request.language)

    def check_language(self, language: str | None) -> str:
        """The language name as the model knows it (lower case; None is auto)."""
        name = (language or "auto").lower()
        if name not in self.languages:
            raise InvalidInputError(
                f"unknown language {shown(language)}; valid languages: {', '.join(self.languages)}", param="language"
            )
        return name

    def tokenize(self, voice: VoiceSpec, text: str, language: str | None) -> TokenizedInput:
        """One text in a checked voice: its language checked and its prompt tokens."""
        text = text.strip()
        if not text:
            raise InvalidInputError("text is empty", param="text")
        return TokenizedInput(self.text_ids(text), self.check_language(language), voice)

    def check_voice(
        self,
        speaker: str | None = None,
        instruct: str | None = None,
        voice: VoicePrompt | None = None,
        whole_text: bool | None = None,
    ) -> VoiceSpec:
        """Check a voice against this model (speaker, instruction, cloned voice) and tokenize its parts."""
        cfg = self.config
        name = speaker.lower() if speaker else None
        if cfg.model_type == "custom_voice":
            if name is None or name not in cfg.talker.spk_id:
                what = f"unknown speaker {shown(speaker)}" if name else "a speaker is required"
                raise InvalidInputError(f"{what}; valid speakers: {', '.join(self.speakers)}", param="speaker")
        elif name is not None:
            raise InvalidInputError(
                f"a {cfg.model_type} model has no preset speakers; drop the speaker", param="speaker"
            )
        instruct = (instruct or "").strip() or None
        if cfg.model_type == "voice_design" and instruct is None:
            raise InvalidInputError("a voice_design model needs an instruction describing the voice", param="instruct")
        if instruct is not None and not cfg.accepts_instruct:
            raise InvalidInputError(
                f"this {cfg.model_type} model (size {cfg.model_size or 'unknown'}) does not take an instruction",
                param="instruct",
            )
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
            if voice.in_context and voice.ref_text_ids is None:  # a prompt saved before it kept its ids
                voice = replace(voice, ref_text_ids=self.reference_ids(voice.ref_text or ""))
        elif voice is not None:
            raise InvalidInputError(
                f"cloned voices need a base checkpoint; this is a {cfg.model_type} model", param="voice"
            )
        instruct_ids = None if instruct is None else tuple(self.tokenizer.encode(INSTRUCTION.format(instruct)))
        return VoiceSpec(
            speaker=name,
            instruct_ids=instruct_ids,
            voice=voice,
            whole_text=whole_text if whole_text is not None else cfg.model_type != "base",
        )

    def _language_id(self, request: TokenizedInput) -> int | None:
        talker = self.config.talker
        speaker = request.voice.speaker
        if speaker is not None and request.language in ("chinese", "auto"):
            dialect = talker.spk_is_dialect.get(speaker)
            if dialect:
                return talker.codec_language_id[dialect]
        return None if request.language == "auto" else talker.codec_language_id[request.language]

    @torch.inference_mode()
    def embed(self, request: TokenizedInput) -> TalkerPrompt:
        """The talker prompt of a checked, tokenized input (nothing is checked or tokenized again here)."""
        cfg, talker = self.config, self.talker
        tc = cfg.talker
        device = talker.device
        voice = request.voice

        def ids(values: Sequence[int]) -> torch.Tensor:
            return torch.tensor([list(values)], dtype=torch.long, device=device)

        text_ids = request.text_ids
        tts_bos, tts_eos, tts_pad = talker.embed_text(
            ids([cfg.tts_bos_token_id, cfg.tts_eos_token_id, cfg.tts_pad_token_id])
        ).chunk(3, dim=1)

        language_id = self._language_id(request)
        if language_id is None:
            tags = [tc.codec_nothink_id, tc.codec_think_bos_id, tc.codec_think_eos_id]
        else:
            tags = [tc.codec_think_id, tc.codec_think_bos_id, language_id, tc.codec_think_eos_id]
        codec_parts = [talker.embed_codec(ids(tags))]
        if voice.speaker is not None:
            codec_parts.append(talker.embed_codec(ids([tc.spk_id[voice.speaker]])))
        elif voice.voice is not None:
            codec_parts.append(voice.voice.speaker_embedding.to(device, tts_pad.dtype).view(1, 1, -1))
        codec_parts.append(talker.embed_codec(ids([tc.codec_pad_id, tc.codec_bos_id])))
        codec = torch.cat(codec_parts, dim=1)

        parts = []
        if voice.instruct_ids is not None:
            parts.append(talker.embed_text(ids(voice.instruct_ids)))
        parts.append(talker.embed_text(ids(self.head_ids)))
        text_overlay = torch.cat((tts_pad.expand(-1, codec.shape[1] - 2, -1), tts_bos), dim=1)
        parts.append(text_overlay + codec[:, :-1])
        if voice.voice is not None and voice.voice.in_context:
            icl, trailing = self._in_context(voice, text_ids, tts_eos, tts_pad)
            parts.append(icl)
        elif voice.whole_text:
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
        self, voice: VoiceSpec, text_ids: tuple[int, ...], tts_eos: torch.Tensor, tts_pad: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """In-context cloning: the reference transcript then the new text, against codec_bos and the
        reference speech's frames. Returns (prompt part (1, T, H), trailing text (N, H))."""
        talker, tc = self.talker, self.config.talker
        device = tts_pad.device
        prompt = voice.voice
        both = torch.tensor([prompt.ref_text_ids + text_ids], dtype=torch.long, device=device)
        text = torch.cat((talker.embed_text(both), tts_eos), dim=1)
        bos = talker.embed_codec(torch.tensor([[tc.codec_bos_id]], device=device))
        speech = talker.frame_embedding(prompt.ref_codes.to(device)).transpose(0, 1)
        codec = torch.cat((bos, speech), dim=1)
        if voice.whole_text:
            pads = talker.embed_codec(torch.full((1, text.shape[1]), tc.codec_pad_id, device=device))
            return torch.cat((text + pads, codec + tts_pad), dim=1), tts_pad[0, :0]
        if text.shape[1] > codec.shape[1]:
            return text[:, : codec.shape[1]] + codec, text[0, codec.shape[1] :]
        padded = torch.cat((text, tts_pad.expand(-1, codec.shape[1] - text.shape[1], -1)), dim=1)
        return padded + codec, tts_pad[0, :0]
