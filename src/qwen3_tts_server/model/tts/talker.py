"""The talker (predicts codebook 0 of each 80 ms frame) and its code predictor (codebooks 1..15).

Module and parameter names mirror the official checkpoint (`talker.model.*`, `talker.code_predictor.*`, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..layers import DecoderStack, Embedding, KVCache
from .config import TalkerConfig
from .sampling import RowSampling, choose


class TextProjection(nn.Module):
    """Two-layer MLP from the text embedding width to the talker width."""

    def __init__(self, in_size: int, out_size: int):
        super().__init__()
        self.linear_fc1 = nn.Linear(in_size, in_size, bias=True)
        self.linear_fc2 = nn.Linear(in_size, out_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(nn.functional.silu(self.linear_fc1(x)))


class TalkerBackbone(DecoderStack):
    def __init__(self, cfg: TalkerConfig):
        super().__init__(cfg.stack)
        self.codec_embedding = Embedding(cfg.vocab_size, cfg.stack.hidden_size)
        self.text_embedding = Embedding(cfg.text_vocab_size, cfg.text_hidden_size)


class CodePredictorBackbone(DecoderStack):
    prefill_in_step = True  # its prefill is the frame's first two inputs, of fixed length

    def __init__(self, cfg: TalkerConfig):
        cp = cfg.code_predictor
        super().__init__(cp.stack, rotary_float32=True)  # half-precision rotations cost the predictor quality
        # Inputs arrive at talker width and are projected down by `small_to_mtp_projection`.
        self.codec_embedding = nn.ModuleList(
            Embedding(cp.vocab_size, cfg.stack.hidden_size) for _ in range(cp.num_code_groups - 1)
        )


class CodePredictor(nn.Module):
    """Predicts codebooks 1..G-1 of a frame from the talker's hidden state and codebook 0."""

    def __init__(self, cfg: TalkerConfig):
        super().__init__()
        cp = cfg.code_predictor
        self.model = CodePredictorBackbone(cfg)
        self.lm_head = nn.ModuleList(
            nn.Linear(cp.stack.hidden_size, cp.vocab_size, bias=False) for _ in range(cp.num_code_groups - 1)
        )
        if cp.stack.hidden_size != cfg.stack.hidden_size:
            self.small_to_mtp_projection = nn.Linear(cfg.stack.hidden_size, cp.stack.hidden_size, bias=True)
        else:
            self.small_to_mtp_projection = nn.Identity()

    def predict(
        self, talker_hidden: torch.Tensor, code0_embedding: torch.Tensor, pick: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """talker_hidden, code0_embedding: (B, 1, talker_hidden). `pick(logits) -> codes (B,)`
        chooses each codebook from its logits (greedy or sampled). Returns codes (B, G-1)."""
        groups = len(self.lm_head)
        cache = self.model.new_cache(talker_hidden.shape[0], groups + 1, talker_hidden.dtype, talker_hidden.device)
        x = self.small_to_mtp_projection(torch.cat((talker_hidden, code0_embedding), dim=1))
        hidden = self.model.prefill(x, cache, slice(None))[:, -1]
        codes = []
        for group in range(groups):
            code = pick(self.lm_head[group](hidden).float())
            codes.append(code)
            if group + 1 < groups:
                x = self.small_to_mtp_projection(self.model.codec_embedding[group](code)[:, None])
                hidden = self.model.decode_aligned(x, cache, position=group + 2)[:, 0]
        return torch.stack(codes, dim=1)

    def sample(
        self,
        talker_hidden: torch.Tensor,
        code0_embedding: torch.Tensor,
        sampling: RowSampling,
        uniforms: torch.Tensor,
    ) -> torch.Tensor:
        """`predict`, each codebook chosen by `sampling.choose` with the row's number for it: uniforms (B, G-1)."""
        columns = iter(uniforms.unbind(1))
        return self.predict(talker_hidden, code0_embedding, lambda logits: choose(logits, sampling, next(columns)))


class Talker(nn.Module):
    def __init__(self, cfg: TalkerConfig):
        super().__init__()
        self.cfg = cfg
        self.model = TalkerBackbone(cfg)
        self.text_projection = TextProjection(cfg.text_hidden_size, cfg.stack.hidden_size)
        self.codec_head = nn.Linear(cfg.stack.hidden_size, cfg.vocab_size, bias=False)
        self.code_predictor = CodePredictor(cfg)

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (that of the final norm's weight: quantisation leaves norms alone)."""
        return self.model.norm.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.norm.weight.device

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text_projection(self.model.text_embedding(ids))

    def embed_codec(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.codec_embedding(ids)

    def frame_embedding(self, codes: torch.Tensor) -> torch.Tensor:
        """Sum of the embeddings of a frame's G codes: codes (B, G) -> (B, 1, hidden)."""
        parts = [self.embed_codec(codes[:, :1])]
        parts += [emb(codes[:, i + 1 : i + 2]) for i, emb in enumerate(self.code_predictor.model.codec_embedding)]
        return torch.cat(parts, dim=1).sum(1, keepdim=True)

    def new_cache(self, rows: int, capacity: int, dtype: torch.dtype, device: torch.device) -> KVCache:
        return self.model.new_cache(rows, capacity, dtype, device)
