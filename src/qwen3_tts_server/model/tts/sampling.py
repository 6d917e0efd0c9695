"""Choosing codes from logits, vectorised over rows that each carry their own settings.

The order of operations is the official one (Hugging Face logits processors): repetition penalty,
minimum length (EOS masked), suppression of the control range, then for sampled rows temperature,
top-k, top-p and a draw. Greedy rows take the argmax of the processed scores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...errors import InvalidInputError
from .config import GenerationDefaults

Setting = tuple[bool, float, int, float]  # do_sample, temperature, top_k, top_p


@dataclass(frozen=True)
class SamplingParams:
    """Settings for one request: the talker's (codebook 0) and the sub-talker's (codebooks 1..15).
    Built from a checkpoint's generation_config.json by `from_defaults` (`Qwen3TTSModel.sampling`)."""

    do_sample: bool
    temperature: float
    top_k: int
    top_p: float
    repetition_penalty: float
    subtalker_do_sample: bool
    subtalker_temperature: float
    subtalker_top_k: int
    subtalker_top_p: float
    seed: int | None = None

    @classmethod
    def from_defaults(cls, defaults: GenerationDefaults, **overrides) -> SamplingParams:
        base = cls(
            do_sample=defaults.do_sample,
            temperature=defaults.temperature,
            top_k=defaults.top_k,
            top_p=defaults.top_p,
            repetition_penalty=defaults.repetition_penalty,
            subtalker_do_sample=defaults.subtalker_dosample,
            subtalker_temperature=defaults.subtalker_temperature,
            subtalker_top_k=defaults.subtalker_top_k,
            subtalker_top_p=defaults.subtalker_top_p,
        )
        params = replace(base, **{k: v for k, v in overrides.items() if v is not None})
        params.validate()
        return params

    @property
    def talker_setting(self) -> Setting:
        return self.do_sample, self.temperature, self.top_k, self.top_p

    @property
    def subtalker_setting(self) -> Setting:
        return self.subtalker_do_sample, self.subtalker_temperature, self.subtalker_top_k, self.subtalker_top_p

    def greedy(self) -> SamplingParams:
        """Argmax for the talker and the sub-talker (the repetition penalty still applies)."""
        return replace(self, do_sample=False, subtalker_do_sample=False)

    def validate(self) -> None:
        for name in ("temperature", "subtalker_temperature"):
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"{name} must be > 0, got {getattr(self, name)}", param=name)
        for name in ("top_p", "subtalker_top_p"):
            if not 0 < getattr(self, name) <= 1:
                raise InvalidInputError(f"{name} must be in (0, 1], got {getattr(self, name)}", param=name)
        for name in ("top_k", "subtalker_top_k"):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0 (0 disables it), got {getattr(self, name)}", param=name)
        if not self.repetition_penalty > 0:
            raise InvalidInputError(
                f"repetition_penalty must be > 0, got {self.repetition_penalty}", param="repetition_penalty"
            )


@dataclass
class RowSampling:
    """Settings of rows as device tensors. A generator keeps one slot per row (`slots`, `write`) and each step
    selects its rows. Two host hints let a batch skip work: `any_sampled` False (every row greedy) skips the
    warping, `largest_top_k` bounds top-k's partial sort. A static step carries no host values: it keeps the
    defaults, which compute everything and choose the same codes."""

    do_sample: torch.Tensor  # (B,) bool: draw, or take the argmax
    temperature: torch.Tensor  # (B, 1)
    top_k: torch.Tensor  # (B,) long, 0 = off
    top_p: torch.Tensor  # (B, 1)
    any_sampled: bool = True
    largest_top_k: int = 0  # 0: as many as the vocabulary

    @classmethod
    def build(cls, rows: list[Setting], device: torch.device) -> RowSampling:
        slots = cls.slots(len(rows), device)
        for slot, setting in enumerate(rows):
            slots.write(slot, setting)
        return slots.select(slice(None), rows)

    @classmethod
    def slots(cls, count: int, device: torch.device) -> RowSampling:
        return cls(
            do_sample=torch.zeros(count, dtype=torch.bool, device=device),
            temperature=torch.ones(count, 1, dtype=torch.float32, device=device),
            top_k=torch.zeros(count, dtype=torch.long, device=device),
            top_p=torch.ones(count, 1, dtype=torch.float32, device=device),
        )

    def write(self, slot: int, setting: Setting) -> None:
        do_sample, temperature, top_k, top_p = setting
        self.do_sample[slot] = do_sample
        self.temperature[slot] = temperature
        self.top_k[slot] = top_k
        self.top_p[slot] = top_p

    def select(self, rows: slice | torch.Tensor, settings: list[Setting] | None = None) -> RowSampling:
        """The settings of `rows`; with the rows' `settings` known on the host, the hints are set from them."""
        selected = RowSampling(self.do_sample[rows], self.temperature[rows], self.top_k[rows], self.top_p[rows])
        if settings is not None:
            selected.any_sampled = any(setting[0] for setting in settings)
            top_ks = [setting[2] for setting in settings]
            selected.largest_top_k = 0 if min(top_ks) <= 0 else max(top_ks)
        return selected


# Random numbers without generator objects: each row's draws are a pure function of its seed and its draw
# counter (SplitMix64 over int64 tensors), so a seeded row draws the same alone or in any batch, every row
# draws in one vectorised operation, and nothing needs a host round trip (what CUDA graphs require).
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)  # the constants as wrapping signed 64-bit integers
_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_MIX2 = 0x94D049BB133111EB - (1 << 64)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical (unsigned) right shift of int64 values."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _mix64(x: torch.Tensor) -> torch.Tensor:
    x = x + _GOLDEN
    x = (x ^ _shift_right(x, 30)) * _MIX1
    x = (x ^ _shift_right(x, 27)) * _MIX2
    return x ^ _shift_right(x, 31)


def stream_uniform(seeds: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """One number in (0, 1] per row (float64) from each row's seed and draw counter (int64 tensors)."""
    z = _mix64(_mix64(seeds) + draws)
    return (_shift_right(z, 11) + 1).double() * 2.0**-53


def apply_repetition_penalty(scores: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """Tokens already generated (seen: (B, V) bool) are made less likely: negative scores multiplied by
    the penalty, positive ones divided by it. penalty: (B, 1)."""
    penalised = torch.where(scores < 0, scores * penalty, scores / penalty)
    return torch.where(seen, penalised, scores)


def _warp(scores: torch.Tensor, params: RowSampling) -> torch.Tensor:
    scores = scores / params.temperature
    vocab = scores.shape[-1]
    k = torch.where(params.top_k > 0, params.top_k.clamp(max=vocab), torch.full_like(params.top_k, vocab))
    largest = min(params.largest_top_k or vocab, vocab)
    kth = torch.topk(scores, largest, dim=-1).values.gather(1, (k - 1)[:, None])
    scores = scores.masked_fill(scores < kth, float("-inf"))
    # top-p: drop the low tail whose cumulative probability is <= 1 - top_p, always keeping the best token.
    sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
    cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = cumulative <= (1 - params.top_p)
    drop_sorted[:, -1] = False
    drop = drop_sorted.scatter(1, order, drop_sorted)
    return scores.masked_fill(drop, float("-inf"))


def choose(scores: torch.Tensor, params: RowSampling, uniform: torch.Tensor) -> torch.Tensor:
    """scores (B, V) float32, already penalised/masked -> chosen ids (B,). A sampled row takes the first token
    whose cumulative probability reaches its `uniform` number (B,) in (0, 1]: a draw from its distribution."""
    chosen = scores.argmax(dim=-1)
    if not params.any_sampled:
        return chosen
    cumulative = _warp(scores, params).softmax(dim=-1).double().cumsum(dim=-1)
    target = uniform[:, None] * cumulative[:, -1:]
    drawn = (cumulative < target).sum(dim=-1).clamp(max=scores.shape[-1] - 1)
    return torch.where(params.do_sample, drawn, chosen)
