"""Qwen3-ASR's text decoder: the Qwen3 decoder stack the talker uses too (`model/layers.py`), its token embedding,
and the prompt's audio placeholders replaced by the encoder's output (docs/asr_reference.md, section f). Its
multimodal RoPE has three equal position streams here, which makes it the ordinary 1-D RoPE of the stack."""

from __future__ import annotations

from typing import Any

import torch

from ..decoder_config import DecoderStackConfig
from ..layers import DecoderStack, Embedding


class AsrDecoder(DecoderStack):
    """Keyed as the checkpoint's `thinker.model.*`; the output head is the embedding table (tied) for the
    transcriber, a head of its own for the aligner."""

    def __init__(self, text_config: dict[str, Any]):
        super().__init__(DecoderStackConfig.parse(text_config, "thinker_config.text_config", 1e-6))
        self.embed_tokens = Embedding(int(text_config["vocab_size"]), self.cfg.hidden_size)

    def embed_prompt(self, ids: torch.Tensor, audio: torch.Tensor, placeholder: int) -> torch.Tensor:
        """[tokens, hidden] embeddings of a prompt, its `placeholder` positions holding the audio's rows in order."""
        embedded = self.embed_tokens(ids)
        slots = ids == placeholder
        if int(slots.sum()) != len(audio):
            raise ValueError(f"the prompt holds {int(slots.sum())} audio placeholders for {len(audio)} audio rows")
        embedded[slots] = audio.to(embedded.dtype)
        return embedded
