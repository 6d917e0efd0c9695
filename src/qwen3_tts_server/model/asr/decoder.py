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


@torch.inference_mode()
def greedy_decode(
    decoder: AsrDecoder, head: torch.Tensor, prompt: torch.Tensor, max_new_tokens: int, stop: set[int]
) -> list[int]:
    """The tokens greedy decoding adds to one embedded prompt [tokens, hidden], its stop token included (as the
    official generate() keeps it), at most `max_new_tokens`."""
    cache = decoder.new_cache(1, len(prompt) + max_new_tokens, prompt.dtype, prompt.device)
    hidden = decoder.prefill(prompt[None], cache, slice(0, 1))[:, -1]
    tokens: list[int] = []
    for position in range(len(prompt), len(prompt) + max_new_tokens):
        token = int((hidden @ head.T).argmax(dim=-1))
        tokens.append(token)
        if token in stop or len(tokens) == max_new_tokens:
            break
        step = decoder.embed_tokens(torch.tensor([[token]], device=prompt.device))
        hidden = decoder.decode_aligned(step, cache, position)[:, -1]
    return tokens
