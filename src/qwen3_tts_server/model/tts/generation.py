"""Step-wise generation of codec frames over a batch of rows.

`FrameGenerator` owns one talker KV cache with a fixed number of rows. `add` prefills a row from its
prompt and samples its first codebook-0 code; `step` advances every active row that is not paused
(`pause`: its consumer is behind) by one 80 ms frame:
the code predictor completes the frame (codebooks 1..15), then one talker step per row, each at its
own position, samples the next codebook-0 code. A row ends on EOS (never before `MIN_FRAMES`) or when it
reaches its frame budget. This is the interface the engine drives; nothing here knows about requests.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from ..step_graphs import SPAN_STEP, GraphBackend, StepGraphs, StepOutputs, batch_buckets, no_row_running, rounded_span
from .config import TalkerConfig
from .fused_predictor import FusedPredictorPath
from .prompt import TalkerPrompt
from .sampling import RowSampling, SamplingParams, apply_repetition_penalty, choose, stream_uniform
from .talker import Talker
from .traced_predictor import PredictorTraces

MIN_FRAMES = 2
# A row's end as the step computes it on the device (an index into FINISH_REASONS): 0 goes on, 1 EOS.
FINISH_CODE_BUDGET = 2  # the row made its frame budget
FINISH_REASONS = (None, "eos", "length")


@dataclass(frozen=True)
class RowRequest:
    """What a row is prefilled with: its prompt, sampling, frame budget, and whether EOS is suppressed."""

    prompt: TalkerPrompt
    params: SamplingParams
    max_frames: int
    suppress_eos: bool = False


@dataclass
class Frame:
    """One frame of one row; `finished` is set on the row's last frame, with the reason."""

    row: int
    codes: torch.Tensor  # (num_code_groups,) long, on the model device
    finished: str | None = None  # "eos" | "length"


class FrameGenerator:
    """Rows' state stays on the device; a step reads the device once, for the rows' end reasons.

    Two ways to step, with the same results: the eager step runs exactly the running rows (gathered by index)
    over the longest of their spans; the static step runs a fixed bucket of rows, the first `bucket` rows with
    every running row among them (new rows take the lowest free row), over a span rounded up to
    `SPAN_STEP`, and masks what the rows that are not running compute. Its shapes depend on (bucket, span)
    alone and it reads nothing from the host, which is what a CUDA graph needs (`graphs`, `StepGraphs`).
    Both default to on with CUDA, where launches, not arithmetic, set the speed; `graph_backend` replaces CUDA's
    graphs (the tests inject failing ones).
    """

    def __init__(
        self,
        talker: Talker,
        rows: int,
        initial_capacity: int = 256,
        static: bool | None = None,
        graphs: bool | None = None,
        graph_backend: GraphBackend | None = None,
        fused: bool | None = None,
        traces: PredictorTraces | None = None,
    ):
        self.talker = talker
        self.cfg: TalkerConfig = talker.cfg
        self.device, self.dtype = talker.device, talker.dtype
        on_cuda = self.device.type == "cuda"
        self.static = on_cuda if static is None else static
        self.buckets = batch_buckets(rows)
        self.cache = talker.new_cache(rows, initial_capacity, self.dtype, self.device)
        # The host keeps each row's sampling settings (None: the row is free). Everything that changes from step
        # to step lives in the per-row device buffers below, so a step depends on the host only through which
        # rows run.
        self.rows: list[SamplingParams | None] = [None] * rows
        # Rows held by their consumer: they keep their place and cache but skip steps until resumed.
        self.paused: set[int] = set()
        vocab = self.cfg.vocab_size
        self.running = torch.zeros(rows, dtype=torch.bool, device=self.device)
        self.hidden = torch.zeros(rows, self.cfg.stack.hidden_size, dtype=self.dtype, device=self.device)
        self.code0 = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.seen = torch.zeros(rows, vocab, dtype=torch.bool, device=self.device)  # repetition history
        self.talker_sampling = RowSampling.slots(rows, self.device)
        self.subtalker_sampling = RowSampling.slots(rows, self.device)
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
        # The code predictor's passes through fused kernels (None: where they can run, on CUDA with Triton).
        self.fused = FusedPredictorPath(talker.code_predictor, fused)
        # Elsewhere (on a CPU), the model's traces of those passes where it keeps them (`traced_predictor.py`).
        self.traces = traces
        graphed = self.static and (on_cuda if graphs is None else graphs)
        self.graphs = StepGraphs(self._layout, lambda: no_row_running(self.running), graph_backend) if graphed else None

    @property
    def graphs_state(self) -> str:
        """CUDA graphs of the step: "on", "off" (not asked for, or no CUDA) or "failed (reason)"."""
        return "off" if self.graphs is None else self.graphs.state

    @property
    def fused_state(self) -> str:
        """The code predictor's fused kernels: "on", "off (why)" or "failed (why)"."""
        return self.fused.state

    @property
    def traced_state(self) -> str:
        """The code predictor's traced passes: "on", "off (why)" or "failed (why)"."""
        return "off (not asked for)" if self.traces is None else self.traces.state

    @property
    def active(self) -> list[int]:
        """The rows that hold a request, paused or not."""
        return [i for i, row in enumerate(self.rows) if row is not None]

    @property
    def stepping(self) -> list[int]:
        """The active rows that are not paused: those a step advances."""
        return [i for i in self.active if i not in self.paused]

    def free_rows(self) -> list[int]:
        return [i for i, row in enumerate(self.rows) if row is None]

    def remove(self, row: int) -> None:
        """Drop a row (its request was cancelled); the row is free for the next `add` at once."""
        self.rows[row] = None
        self.running[row] = False
        self.paused.discard(row)

    def pause(self, row: int) -> None:
        """Hold an active row: it skips steps at no cost (not running, it is masked like a free row in a static
        step) and, resumed, makes exactly the frames it would have made; the other rows' frames do not change."""
        self.paused.add(row)
        self.running[row] = False

    def resume(self, row: int) -> None:
        self.paused.remove(row)
        self.running[row] = True

    def add(self, prompt: TalkerPrompt, params: SamplingParams, max_frames: int, suppress_eos: bool = False) -> int:
        """Prefill the lowest free row with `prompt`; returns the row index. `suppress_eos` makes the row run
        to `max_frames` (benchmarks compare equal work)."""
        return self.add_many([RowRequest(prompt, params, max_frames, suppress_eos)])[0]

    @torch.inference_mode()
    def add_many(self, requests: list[RowRequest]) -> list[int]:
        """Prefill the lowest free rows with these prompts in one forward (`DecoderStack.prefill_packed`); returns their
        rows, in order. Each row's state and first code are those it gets from `add` alone."""
        free = self.free_rows()
        if len(free) < len(requests):
            raise RuntimeError(f"{len(requests)} rows asked for, {len(free)} free")
        indices = free[: len(requests)]
        for index, request in zip(indices, requests, strict=True):
            self._reset_row(index, request)
        lengths = [request.prompt.prefill.shape[0] for request in requests]
        packed = torch.cat([request.prompt.prefill.to(self.dtype) for request in requests])
        hidden = self.talker.model.prefill_packed(packed, lengths, self.cache, indices)
        rows = torch.tensor(indices, device=self.device)
        settings = [request.params.talker_setting for request in requests]
        self._sample_code0(rows, hidden, self.talker_sampling.select(rows, settings))
        return indices

    def _reset_row(self, index: int, request: RowRequest) -> None:
        params = request.params
        self.rows[index] = params
        self.running[index] = True
        self.talker_sampling.write(index, params.talker_setting)
        self.subtalker_sampling.write(index, params.subtalker_setting)
        self.seen[index] = False
        self.seeds[index] = params.seed if params.seed is not None else secrets.randbits(63)
        self.draws[index] = 0
        self.frames[index] = 0
        self.budget[index] = max(request.max_frames, 1)
        self.sampled[index] = 0
        self.suppress_eos[index] = request.suppress_eos
        self.penalty[index] = params.repetition_penalty
        self._set_text(index, request.prompt)

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

    @torch.inference_mode()
    def step(self) -> list[Frame]:
        """Advance every active row that is not paused by one frame; returns one frame per row it advanced."""
        indices = self.stepping
        if not indices:
            return []
        if self.static:
            bucket, span = self.static_shape(indices)
            rows: slice | torch.Tensor = slice(0, bucket)
            codes, ended = self.static_frame(bucket, span)
            positions = indices  # a row's place in the step is its index
        else:
            span = max(self.cache.lengths[i] for i in indices) + 1
            rows = torch.tensor(indices, device=self.device)
            settings = [self.rows[i] for i in indices]
            talker = self.talker_sampling.select(rows, [p.talker_setting for p in settings])
            subtalker = self.subtalker_sampling.select(rows, [p.subtalker_setting for p in settings])
            self._reserve(span)
            codes, ended = self._frame(rows, span, talker, subtalker)
            positions = range(len(indices))
        self.cache.advance(rows, self.running[rows], indices)
        reasons = ended.tolist()  # the one read from the device
        frames = []
        for row_index, position in zip(indices, positions, strict=True):
            finished = FINISH_REASONS[reasons[position]]
            frames.append(Frame(row=row_index, codes=codes[position], finished=finished))
            if finished:
                self.remove(row_index)
        return frames

    def static_shape(self, indices: list[int]) -> tuple[int, int]:
        """The (bucket, span) of a static step over the rows `indices`: the smallest bucket that holds them all,
        and the longest span of the active rows in it rounded up to SPAN_STEP. A paused row in the bucket counts:
        its masked write lands at its own next position only while that position is inside the span."""
        bucket = next(size for size in self.buckets if size > indices[-1])
        span = max(self.cache.lengths[i] for i in self.active if i < bucket) + 1
        return bucket, rounded_span(span)

    @torch.inference_mode()
    def static_frame(self, bucket: int, span: int) -> StepOutputs:
        """The device work of a static step over the first `bucket` rows and `span` cache positions, from its
        graph when graphs are on. Every running row must be among those rows, with a length below `span`."""
        self._reserve(span)
        rows = slice(0, bucket)
        talker, subtalker = self.talker_sampling.select(rows), self.subtalker_sampling.select(rows)
        if self.graphs is None:
            return self._frame(rows, span, talker, subtalker)
        return self.graphs.run((bucket, span), lambda: self._frame(rows, span, talker, subtalker))

    @torch.inference_mode()
    def capture(self, spans: tuple[int, ...] = (SPAN_STEP, 2 * SPAN_STEP)) -> int:
        """Capture the step of every row bucket at these attention spans before any row runs (a warm-up:
        later spans are captured on first use). Returns how many graphs are held."""
        if self.graphs is None:
            return 0
        if self.active:
            raise RuntimeError("capture before rows run: a warm-up pass at a short span would overwrite their keys")
        for span in spans:
            for bucket in self.buckets:
                self.static_frame(bucket, span)
        return len(self.graphs)

    def _reserve(self, span: int) -> None:
        """Room for a step over `span` cache positions; the rotary table grows with the cache, not with the span,
        so that the buffers a captured step reads move only when the cache does."""
        self.cache.ensure_capacity(span)
        self.talker.model.rotary.table(self.cache.capacity, self.talker.model.rotary_dtype(self.dtype))

    def _layout(self) -> tuple[int, ...]:
        """The addresses of the buffers a step reads that can move (grown by doubling)."""
        cache, model = self.cache, self.talker.model
        return (
            cache.k.data_ptr(),
            cache.v.data_ptr(),
            self.trailing.data_ptr(),
            *model.rotary.addresses(),
            *self.talker.code_predictor.model.rotary.addresses(),
        )

    def _frame(self, rows: slice | torch.Tensor, span: int, talker: RowSampling, subtalker: RowSampling) -> StepOutputs:
        """The device work of a step over `rows`: complete each row's frame (codebooks 1..15), take its talker
        step and sample its next codebook-0 code. Returns the frames' codes (B, G) and each row's end (B,)."""
        running = self.running[rows]
        code0 = self.code0[rows]
        hidden0, embedded0 = self.hidden[rows][:, None], self.talker.embed_codec(code0[:, None])
        uniforms = self._uniforms(rows, running, len(self.talker.code_predictor.lm_head))
        rest = self.fused.predict(hidden0, embedded0, subtalker, uniforms)
        if rest is None and self.traces is not None:
            rest = self.traces.predict(hidden0, embedded0, subtalker, uniforms)
        if rest is None:
            rest = self.talker.code_predictor.sample(hidden0, embedded0, subtalker, uniforms)
        codes = torch.cat((code0[:, None], rest), dim=1)
        self.frames[rows] += running
        made = self.frames[rows]
        # Every row takes its talker step, also one at its budget (that step's code is never used): the work of
        # a step depends on which rows run, never on values that only the device knows.
        inputs = self.talker.frame_embedding(codes) + self._text_input(rows, made - 1)[:, None]
        hidden = self.talker.model.decode(inputs, self.cache, rows, span)[:, 0]
        self._sample_code0(rows, hidden, talker)
        eos = self.code0[rows] == self.cfg.codec_eos_id
        return codes, torch.where(made >= self.budget[rows], FINISH_CODE_BUDGET, eos.long())

    def _sample_code0(self, rows: slice | torch.Tensor, hidden: torch.Tensor, sampling: RowSampling) -> None:
        """Choose the next codebook-0 code of the running rows among `rows` from their talker states."""
        running = self.running[rows]
        scores = self.talker.codec_head(hidden).float()
        seen = self.seen[rows]
        scores = apply_repetition_penalty(scores, seen, self.penalty[rows])
        no_eos = self.suppress_eos[rows] | (self.sampled[rows] < MIN_FRAMES)
        eos = self.cfg.codec_eos_id
        scores[:, eos] = scores[:, eos].masked_fill(no_eos, float("-inf"))  # no boolean indexing: no device read
        scores = scores.masked_fill(self._suppressed, float("-inf"))
        codes = choose(scores, sampling, self._uniforms(rows, running, 1)[:, 0])
        self.hidden[rows] = torch.where(running[:, None], hidden, self.hidden[rows])
        self.code0[rows] = torch.where(running, codes, self.code0[rows])
        self.seen[rows] = seen.scatter(1, codes[:, None], running[:, None] | seen.gather(1, codes[:, None]))
        self.sampled[rows] += running

    def _uniforms(self, rows: slice | torch.Tensor, running: torch.Tensor, count: int) -> torch.Tensor:
        """The next `count` random numbers of each of these rows (B, count); the running rows' draw counters
        advance by `count`."""
        draws = self.draws[rows][:, None] + torch.arange(count, device=self.device)
        uniforms = stream_uniform(self.seeds[rows][:, None], draws)
        self.draws[rows] += running * count
        return uniforms

    def _text_input(self, rows: slice | torch.Tensor, step: torch.Tensor) -> torch.Tensor:
        """The text embedding each row adds at decode step `step` (B,): its trailing text, then its pad."""
        trailing = self.trailing[self.cache.row_index(rows), step.clamp(0, self.trailing.shape[1] - 1)]
        return torch.where((step < self.trailing_length[rows])[:, None], trailing, self.pad[rows])
