"""Step-wise generation of codec frames over a batch of rows.

`FrameGenerator` owns one talker KV cache with a fixed number of rows. `add` prefills a row from its
prompt and samples its first codebook-0 code; `step` advances every active row by one 80 ms frame:
the code predictor completes the frame (codebooks 1..15), then one talker step per row, each at its
own position, samples the next codebook-0 code. A row ends on EOS (never before `MIN_FRAMES`) or when it
reaches its frame budget. This is the interface the engine drives; nothing here knows about requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import TalkerConfig
from .prompt import TalkerPrompt
from .sampling import RowSampling, SamplingParams, apply_repetition_penalty, choose
from .talker import Talker

MIN_FRAMES = 2


@dataclass
class _Row:
    prompt: TalkerPrompt
    params: SamplingParams
    max_frames: int
    suppress_eos: bool
    generator: torch.Generator | None
    seen: torch.Tensor  # (V,) bool: codebook-0 codes generated so far (repetition penalty history)
    hidden: torch.Tensor | None = None  # talker output at the last position (hidden,)
    code0: int = -1  # codebook-0 code waiting for the code predictor
    frames: int = 0
    sampled: int = 0


@dataclass
class Frame:
    """One frame of one row; `finished` is set on the row's last frame, with the reason."""

    row: int
    codes: torch.Tensor  # (num_code_groups,) long, on the model device
    finished: str | None = None  # "eos" | "length"


class FrameGenerator:
    def __init__(self, talker: Talker, rows: int, initial_capacity: int = 256):
        self.talker = talker
        self.cfg: TalkerConfig = talker.cfg
        weight = talker.codec_head.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.cache = talker.new_cache(rows, initial_capacity, self.dtype, self.device)
        self.rows: list[_Row | None] = [None] * rows
        # The top 1024 codec ids are control tokens (tags, speakers, languages): never generated, but EOS.
        vocab = self.cfg.vocab_size
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
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device=self.device)
            generator.manual_seed(params.seed)
        row = _Row(
            prompt=prompt,
            params=params,
            max_frames=max(max_frames, 1),
            suppress_eos=suppress_eos,
            generator=generator,
            seen=torch.zeros(self.cfg.vocab_size, dtype=torch.bool, device=self.device),
        )
        rows = torch.tensor([index], device=self.device)
        hidden = self.talker.model.prefill(prompt.prefill[None].to(self.dtype), self.cache, rows)[:, -1]
        self.rows[index] = row
        self._sample_code0([index], hidden)
        return index

    def _sample_code0(self, indices: list[int], hidden: torch.Tensor) -> None:
        rows = [self.rows[i] for i in indices]
        scores = self.talker.codec_head(hidden).float()
        seen = torch.stack([r.seen for r in rows])
        penalty = torch.tensor([[r.params.repetition_penalty] for r in rows], device=self.device)
        scores = apply_repetition_penalty(scores, seen, penalty)
        no_eos = torch.tensor([r.suppress_eos or r.sampled < MIN_FRAMES for r in rows], device=self.device)
        scores[no_eos, self.cfg.codec_eos_id] = float("-inf")
        scores = scores.masked_fill(self._suppressed, float("-inf"))
        params = RowSampling.build(
            [(r.params.do_sample, r.params.temperature, r.params.top_k, r.params.top_p) for r in rows], self.device
        )
        codes = choose(scores, params, [r.generator for r in rows]).tolist()
        for r, h, code in zip(rows, hidden, codes, strict=True):
            r.hidden, r.code0 = h, code
            r.seen[code] = True
            r.sampled += 1

    @torch.inference_mode()
    def step(self) -> list[Frame]:
        """Advance every active row by one frame; returns one frame per row that was active."""
        indices = self.active
        frames: list[Frame] = []
        if not indices:
            return frames
        rows = [self.rows[i] for i in indices]
        code0 = torch.tensor([r.code0 for r in rows], device=self.device)
        hidden = torch.stack([r.hidden for r in rows])[:, None]
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
        generators = [r.generator for r in rows]
        rest = self.talker.code_predictor.predict(
            hidden,
            self.talker.embed_codec(code0[:, None]),
            lambda logits: choose(logits, sub_params, generators),
        )
        codes = torch.cat((code0[:, None], rest), dim=1)

        continuing: list[int] = []
        for position, (index, row) in enumerate(zip(indices, rows, strict=True)):
            row.frames += 1
            frame = Frame(row=index, codes=codes[position])
            if row.frames >= row.max_frames:
                frame.finished = "length"
            else:
                continuing.append(position)
            frames.append(frame)
        if continuing:
            keep = torch.tensor(continuing, device=self.device)
            inputs = self.talker.frame_embedding(codes[keep])
            inputs = inputs + torch.stack([self._text_input(rows[p]) for p in continuing])[:, None]
            cache_rows = torch.tensor([indices[p] for p in continuing], device=self.device)
            new_hidden = self.talker.model.decode(inputs, self.cache, cache_rows)[:, 0]
            self._sample_code0([indices[p] for p in continuing], new_hidden)
            for p in continuing:
                if rows[p].code0 == self.cfg.codec_eos_id:
                    frames[p].finished = "eos"
        for frame in frames:
            if frame.finished:
                self.rows[frame.row] = None
        return frames

    def _text_input(self, row: _Row) -> torch.Tensor:
        step = row.frames - 1
        return row.prompt.trailing[step] if step < row.prompt.trailing.shape[0] else row.prompt.pad
