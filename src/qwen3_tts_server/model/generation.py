"""Step-wise generation of codec frames over a batch of rows.

`FrameGenerator` owns one talker KV cache with a fixed number of rows. `add` prefills a row from its
prompt and samples its first codebook-0 code; `step` advances every active row by one 80 ms frame:
the code predictor completes the frame (codebooks 1..15), then one talker step per row, each at its
own position, samples the next codebook-0 code. A row ends on EOS (never before `MIN_FRAMES`) or when it
reaches its frame budget. This is the interface the engine drives; nothing here knows about requests.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from .config import TalkerConfig
from .prompt import TalkerPrompt
from .sampling import RowSampling, SamplingParams, apply_repetition_penalty, choose, stream_uniform
from .talker import Talker

MIN_FRAMES = 2


@dataclass
class _Row:
    """Host-side bookkeeping of a row; its tensors (last hidden state, pending codebook-0 code, code
    history) live in the generator's per-row device buffers."""

    prompt: TalkerPrompt
    params: SamplingParams
    max_frames: int
    suppress_eos: bool
    frames: int = 0
    sampled: int = 0


@dataclass
class Frame:
    """One frame of one row; `finished` is set on the row's last frame, with the reason."""

    row: int
    codes: torch.Tensor  # (num_code_groups,) long, on the model device
    finished: str | None = None  # "eos" | "length"


class FrameGenerator:
    """Rows' state stays on the device; a step reads the device once, for the new codes (EOS checks)."""

    def __init__(self, talker: Talker, rows: int, initial_capacity: int = 256):
        self.talker = talker
        self.cfg: TalkerConfig = talker.cfg
        weight = talker.codec_head.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.cache = talker.new_cache(rows, initial_capacity, self.dtype, self.device)
        self.rows: list[_Row | None] = [None] * rows
        vocab = self.cfg.vocab_size
        self.hidden = torch.zeros(rows, self.cfg.stack.hidden_size, dtype=self.dtype, device=self.device)
        self.code0 = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.seen = torch.zeros(rows, vocab, dtype=torch.bool, device=self.device)  # repetition history
        # Each row's random stream: its seed and how many numbers it has drawn (sampling.stream_uniform).
        self.seeds = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.draws = torch.zeros(rows, dtype=torch.long, device=self.device)
        # The top 1024 codec ids are control tokens (tags, speakers, languages): never generated, but EOS.
        suppressed = torch.zeros(vocab, dtype=torch.bool, device=self.device)
        suppressed[vocab - 1024 :] = True
        suppressed[self.cfg.codec_eos_id] = False
        self._suppressed = suppressed

    @property
    def active(self) -> list[int]:
        return [i for i, row in enumerate(self.rows) if row is not None]

    def free_rows(self) -> list[int]:
        return [i for i, row in enumerate(self.rows) if row is None]

    def remove(self, row: int) -> None:
        """Drop a row (its request was cancelled); the row is free for the next `add` at once."""
        self.rows[row] = None

    @torch.inference_mode()
    def add(self, prompt: TalkerPrompt, params: SamplingParams, max_frames: int, suppress_eos: bool = False) -> int:
        """Prefill a free row with `prompt`; returns the row index. `suppress_eos` makes the row run to
        `max_frames` (benchmarks compare equal work)."""
        free = self.free_rows()
        if not free:
            raise RuntimeError("no free row")
        index = free[0]
        self.rows[index] = _Row(prompt, params, max(max_frames, 1), suppress_eos)
        self.seen[index] = False
        self.seeds[index] = params.seed if params.seed is not None else secrets.randbits(63)
        self.draws[index] = 0
        hidden = self.talker.model.prefill(prompt.prefill[None].to(self.dtype), self.cache, [index])[:, -1]
        self._sample_code0([index], hidden)
        return index

    def _sample_code0(self, indices: list[int], hidden: torch.Tensor) -> None:
        rows = [self.rows[i] for i in indices]
        index = torch.tensor(indices, device=self.device)
        scores = self.talker.codec_head(hidden).float()
        penalty = torch.tensor([[r.params.repetition_penalty] for r in rows], device=self.device)
        scores = apply_repetition_penalty(scores, self.seen[index], penalty)
        no_eos = torch.tensor([r.suppress_eos or r.sampled < MIN_FRAMES for r in rows], device=self.device)
        eos = self.cfg.codec_eos_id
        scores[:, eos] = scores[:, eos].masked_fill(no_eos, float("-inf"))  # no boolean indexing: no device read
        scores = scores.masked_fill(self._suppressed, float("-inf"))
        params = RowSampling.build(
            [(r.params.do_sample, r.params.temperature, r.params.top_k, r.params.top_p) for r in rows], self.device
        )
        codes = choose(scores, params, self._uniform(index))
        self.hidden[index] = hidden
        self.code0[index] = codes
        self.seen[index, codes] = True
        for r in rows:
            r.sampled += 1

    @torch.inference_mode()
    def step(self) -> list[Frame]:
        """Advance every active row by one frame; returns one frame per row that was active."""
        indices = self.active
        if not indices:
            return []
        rows = [self.rows[i] for i in indices]
        index = torch.tensor(indices, device=self.device)
        code0 = self.code0[index]
        sub_params = RowSampling.build(
            [
                (
                    r.params.subtalker_do_sample,
                    r.params.subtalker_temperature,
                    r.params.subtalker_top_k,
                    r.params.subtalker_top_p,
                )
                for r in rows
            ],
            self.device,
        )
        rest = self.talker.code_predictor.predict(
            self.hidden[index][:, None],
            self.talker.embed_codec(code0[:, None]),
            lambda logits: choose(logits, sub_params, self._uniform(index)),
        )
        codes = torch.cat((code0[:, None], rest), dim=1)
        for row in rows:
            row.frames += 1
        continuing = [p for p, row in enumerate(rows) if row.frames < row.max_frames]
        if continuing:
            keep = torch.tensor(continuing, device=self.device)
            inputs = self.talker.frame_embedding(codes[keep])
            inputs = inputs + torch.stack([self._text_input(rows[p]) for p in continuing])[:, None]
            cache_rows = [indices[p] for p in continuing]
            new_hidden = self.talker.model.decode(inputs, self.cache, cache_rows)[:, 0]
            self._sample_code0(cache_rows, new_hidden)
        next_code0 = self.code0[index].tolist()  # the one read from the device per step
        frames = []
        for position, (row_index, row) in enumerate(zip(indices, rows, strict=True)):
            if row.frames >= row.max_frames:
                finished = "length"
            elif next_code0[position] == self.cfg.codec_eos_id:
                finished = "eos"
            else:
                finished = None
            frames.append(Frame(row=row_index, codes=codes[position], finished=finished))
            if finished:
                self.rows[row_index] = None
        return frames

    def _uniform(self, index: torch.Tensor) -> torch.Tensor:
        """The next random number of each of these rows (their draw counters advance on the device)."""
        uniform = stream_uniform(self.seeds[index], self.draws[index])
        self.draws[index] += 1
        return uniform

    def _text_input(self, row: _Row) -> torch.Tensor:
        step = row.frames - 1
        return row.prompt.trailing[step] if step < row.prompt.trailing.shape[0] else row.prompt.pad
