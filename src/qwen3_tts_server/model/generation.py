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
LENGTH = 2  # a row's end, as the step computes it on the device: 0 goes on, 1 EOS, 2 its frame budget
FINISH_REASONS = (None, "eos", "length")


@dataclass
class _Row:
    """Host-side bookkeeping of a row: its sampling settings. Everything that changes from step to step
    (hidden state, pending codebook-0 code, code history, frame and draw counters, text input) lives in the
    generator's per-row device buffers, so that a step depends on the host only through which rows run."""

    params: SamplingParams


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
        self.frames = torch.zeros(rows, dtype=torch.long, device=self.device)  # frames made
        self.budget = torch.ones(rows, dtype=torch.long, device=self.device)  # frames allowed
        self.sampled = torch.zeros(rows, dtype=torch.long, device=self.device)  # codebook-0 codes drawn
        self.suppress_eos = torch.zeros(rows, dtype=torch.bool, device=self.device)
        self.penalty = torch.ones(rows, 1, dtype=torch.float32, device=self.device)  # repetition penalty
        # The text fed alongside each frame: the prompt's trailing embeddings, then its pad embedding.
        hidden = self.cfg.stack.hidden_size
        self.trailing = torch.zeros(rows, 16, hidden, dtype=self.dtype, device=self.device)
        self.trailing_length = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.pad = torch.zeros(rows, hidden, dtype=self.dtype, device=self.device)
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
        self.rows[index] = _Row(params)
        self.seen[index] = False
        self.seeds[index] = params.seed if params.seed is not None else secrets.randbits(63)
        self.draws[index] = 0
        self.frames[index] = 0
        self.budget[index] = max(max_frames, 1)
        self.sampled[index] = 0
        self.suppress_eos[index] = suppress_eos
        self.penalty[index] = params.repetition_penalty
        self._set_text(index, prompt)
        hidden = self.talker.model.prefill(prompt.prefill[None].to(self.dtype), self.cache, [index])[:, -1]
        self._sample_code0([index], hidden)
        return index

    def _set_text(self, index: int, prompt: TalkerPrompt) -> None:
        length = prompt.trailing.shape[0]
        if length > self.trailing.shape[1]:  # grown by doubling, like the KV cache
            capacity = self.trailing.shape[1]
            while capacity < length:
                capacity *= 2
            grown = self.trailing.new_zeros(self.trailing.shape[0], capacity, self.trailing.shape[2])
            grown[:, : self.trailing.shape[1]] = self.trailing
            self.trailing = grown
        self.trailing[index, :length] = prompt.trailing.to(self.dtype)
        self.trailing_length[index] = length
        self.pad[index] = prompt.pad.to(self.dtype)

    def _sample_code0(self, indices: list[int], hidden: torch.Tensor) -> None:
        rows = [self.rows[i] for i in indices]
        index = torch.tensor(indices, device=self.device)
        scores = self.talker.codec_head(hidden).float()
        scores = apply_repetition_penalty(scores, self.seen[index], self.penalty[index])
        no_eos = self.suppress_eos[index] | (self.sampled[index] < MIN_FRAMES)
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
        self.sampled[index] += 1

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
        self.frames[index] += 1
        made = self.frames[index]
        # Every row takes its talker step, also one at its budget (that step's code is never used): the work of
        # a step depends on which rows run, never on values that only the device knows.
        inputs = self.talker.frame_embedding(codes) + self._text_input(index, made - 1)[:, None]
        new_hidden = self.talker.model.decode(inputs, self.cache, indices)[:, 0]
        self._sample_code0(indices, new_hidden)
        ended = torch.where(made >= self.budget[index], LENGTH, (self.code0[index] == self.cfg.codec_eos_id).long())
        frames = []
        for position, (row_index, reason) in enumerate(zip(indices, ended.tolist(), strict=True)):  # the one read
            finished = FINISH_REASONS[reason]
            frames.append(Frame(row=row_index, codes=codes[position], finished=finished))
            if finished:
                self.rows[row_index] = None
        return frames

    def _uniform(self, index: torch.Tensor) -> torch.Tensor:
        """The next random number of each of these rows (their draw counters advance on the device)."""
        uniform = stream_uniform(self.seeds[index], self.draws[index])
        self.draws[index] += 1
        return uniform

    def _text_input(self, index: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
        """The text embedding each row adds at decode step `step` (B,): its trailing text, then its pad."""
        trailing = self.trailing[index, step.clamp(max=self.trailing.shape[1] - 1)]
        return torch.where((step < self.trailing_length[index])[:, None], trailing, self.pad[index])
