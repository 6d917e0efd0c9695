"""The recognition engine: transcription parts decoded side by side, a token a step (`rows.py`: the thread,
admission, expiry, faults), their tokens streamed to asyncio as they are decoded.

A job is one part of a recording (the service cuts long audio where the official package cuts it). Admitting it
encodes its audio alone (the official encoder-per-audio rule, so a part's result never depends on its neighbours),
builds its prompt and prefills it into a free row of one `GreedyRows`, which gives its first token; each step then
adds a token to every running row. A row leaves on a stop token or when its budget is spent, and a waiting part
takes its place at the next step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import TranscriptionFailedError, TranscriptionTimeoutError, TTSError
from ..model.asr.aligner import ForcedAligner
from ..model.asr.decoding import CachedPrompt, Emitted, GreedyRows
from ..model.asr.loading import load_asr_checkpoint
from ..model.asr.mel import SAMPLE_RATE
from ..model.asr.transcriber import Transcriber, check_length, part_budget
from ..model.asr.word_split import WordSplitter
from .jobs import RequestClock
from .model_manager import ModelManager
from .rows import END, RowEngine, RowHandle, RowStream

log = logging.getLogger(__name__)
TRANSCRIPTION_FAILED = "transcription failed; the server logged the details"
CPU_ROWS, GPU_ROWS = 8, 32
GPU_PREFILLS_PER_STEP = 32  # uploads a GPU step admits, encoded and prefilled together
WARM_UP_SECONDS = 1.0


@dataclass(frozen=True, eq=False)
class TranscriptionJob:
    wave: np.ndarray  # one part: float32 mono at 16 kHz
    language: str | None = None  # an official name (forced), or None (identified by the model)
    context: str = ""
    max_new_tokens: int | None = None  # default: the part's budget by its length (`part_budget`)
    temperature: float = 0.0  # 0: greedy, the official package's decoding; above, sampled from a random seed
    interactive: bool = False  # live sessions are admitted before uploads
    continuation: bool = False  # a later part of a request under way: never refused, admitted first
    timeout: float | None = None  # seconds from submission, when submitted without a RequestClock
    # A live pass's prompt, made on admission on the engine thread for the model it holds: the prompt after a cached
    # beginning, and that beginning (`IncrementalPasses.prepare`). None: the part's own prompt, from `wave`.
    prompt: Callable[[Transcriber], tuple[torch.Tensor, CachedPrompt]] | None = None
    draft: tuple[int, ...] = ()  # a live pass's guess at its first tokens, kept where the model confirms it

    @property
    def budget(self) -> int:
        return self.max_new_tokens or part_budget(len(self.wave))

    @property
    def seconds(self) -> float:
        return len(self.wave) / SAMPLE_RATE


@dataclass(frozen=True)
class DecodedToken:
    """One token of a part, in order. The last has `finish_reason`: "stop" (the model ended the text) or "length"
    (the part's budget was spent first)."""

    token: int
    index: int
    logprob: float  # under the model's distribution
    queue_seconds: float  # from submission to admission
    elapsed_seconds: float  # from submission to this token
    finish_reason: str | None = None


@dataclass(eq=False)
class _Handle(RowHandle[TranscriptionJob]):
    tokens: int = 0


class TokenStream(RowStream[_Handle]):
    """Async iterator over a part's `DecodedToken`s. Closing it, or cancelling the task awaiting it, cancels the
    part: the engine frees its row within one step."""

    async def __anext__(self) -> DecodedToken:
        return await super().__anext__()


def load_transcriber(
    directory: str | os.PathLike,
    device: str,
    dtype: str | torch.dtype,
    quantize: str | None,
    aligner: str | os.PathLike | None = None,
    korean_words: Path | None = None,
    prefill_weights: str = "auto",
    aligner_precision: tuple[str | torch.dtype, str | None] | None = None,
) -> Transcriber:
    """A transcriber, with the ForcedAligner checkpoint `aligner` for word timestamps if given (in
    `aligner_precision`, dtype and quantisation, or the transcriber's)."""
    model = load_asr_checkpoint(directory, device, dtype, quantize, prefill_weights)
    timer = None
    if aligner is not None:
        aligner_dtype, aligner_quantize = aligner_precision or (dtype, quantize)
        timer = load_asr_checkpoint(aligner, device, aligner_dtype, aligner_quantize, prefill_weights)
    return Transcriber(model, timer, WordSplitter(korean_words))


def load_forced_aligner(
    directory: str | os.PathLike, device: str, dtype: str | torch.dtype, quantize: str | None, korean_words: Path | None
) -> ForcedAligner:
    """A ForcedAligner hosted without a transcriber: it times the words of synthesised speech."""
    return ForcedAligner(load_asr_checkpoint(directory, device, dtype, quantize), WordSplitter(korean_words))


def warm_up_transcriber(transcriber: Transcriber) -> None:
    """One second of silence through the encoder, the prefill and two steps."""
    transcriber.transcribe([np.zeros(int(WARM_UP_SECONDS * SAMPLE_RATE), dtype=np.float32)], max_new_tokens=2)


class RecognitionEngine(RowEngine[TranscriptionJob, _Handle]):
    thread_name = "asr-engine"
    timeout_error = TranscriptionTimeoutError

    def __init__(
        self,
        models: ModelManager | Transcriber,
        max_batch_size: int | None = None,
        max_queue_depth: int = 64,
        max_prefills_per_step: int | None = None,
        cpu_cores: set[int] | None = None,
        cuda_graphs: bool = True,
    ):
        if isinstance(models, Transcriber):
            transcriber = models
            models = ModelManager(lambda: transcriber, warmup=None, config_of=lambda model: model.model)
            models.get()
        on_cuda = torch.cuda.is_available()
        super().__init__(
            models,
            max_batch_size or (GPU_ROWS if on_cuda else CPU_ROWS),
            max_queue_depth,
            # a step admits as many as a GPU encodes and prefills together; a CPU's 30 s prefill holds live rows ~1 s
            max_prefills_per_step or (GPU_PREFILLS_PER_STEP if on_cuda else 1),
            cpu_cores,
        )
        self.cuda_graphs = cuda_graphs  # replay the token step as CUDA graphs where the model is on CUDA
        self.rows: GreedyRows | None = None  # exists while the model is loaded
        self._rows_of: Transcriber | None = None  # the transcriber `rows` decodes for

    def submit(self, job: TranscriptionJob, clock: RequestClock | None = None) -> TokenStream:
        """Queue a part; call from the event loop (`RowEngine.submit`). A part too short to encode is refused here
        (InvalidInputError), not in the engine."""
        check_length(job.wave, "the audio")
        stream = super().submit(job, clock)
        assert isinstance(stream, TokenStream)
        return stream

    # -- what a row is -----------------------------------------------------------------------------------------

    def _failed(self) -> TTSError:
        return TranscriptionFailedError(TRANSCRIPTION_FAILED)

    def _handle(self, job: TranscriptionJob, loop: asyncio.AbstractEventLoop, clock: RequestClock) -> _Handle:
        return _Handle(job, loop, asyncio.Queue(), time.monotonic(), clock)

    def _stream(self, handle: _Handle) -> TokenStream:
        return TokenStream(handle, self)

    def _ensure_runner(self, model: Transcriber) -> None:
        if self.rows is None or self._rows_of is not model:  # none yet, or an unloaded model's
            self.rows = model.rows(self.max_batch_size, graphs=None if self.cuda_graphs else False)
            self._rows_of = model

    def _drop_runner(self) -> None:
        self.rows = self._rows_of = None

    def _runner_built(self) -> bool:
        return self.rows is not None

    def _free_row_count(self) -> int:
        return self.rows.free_slots

    def _rows_held(self) -> list[int]:
        return list(self.rows.rows)

    def _remove_row(self, row: int) -> None:
        self.rows.leave(row)

    def _prefill(self, model: Transcriber, handle: _Handle) -> None:
        job = handle.job
        if job.prompt is not None:
            prompt, after = job.prompt(model)
        else:
            prompt, after = model.embedded_prompt(job.wave, job.context, job.language), None
        self._admitted(handle, *self.rows.join(prompt, job.budget, job.temperature, after=after, draft=job.draft))

    def _admitted(self, handle: _Handle, row: int, first: list[Emitted]) -> None:
        handle.row, handle.admitted = row, time.monotonic()
        self._active[row] = handle
        self._deliver(first)

    def _prefill_many(self, model: Transcriber, handles: list[_Handle]) -> None:
        """Uploads' parts (greedy, no live prompt) encoded and prefilled together (`Transcriber.embedded_prompts`,
        `GreedyRows.join_many`: packed on CUDA); the others, or all of them again one at a time if that fails (then
        only a faulty request fails), as `_prefill` admits one."""
        uploads = [h for h in handles if h.job.prompt is None and not h.job.draft and h.job.temperature == 0]
        rest = [handle for handle in handles if handle not in uploads]
        if len(uploads) > 1:
            joined: list[tuple[int, list[Emitted]]] = []
            # admitted once the prefill has run: a retry one at a time never delivers a first token twice
            if self._prefill_together(model, uploads, lambda: joined.extend(self._join_together(model, uploads))):
                for handle, (row, first) in zip(uploads, joined, strict=True):
                    self._admitted(handle, row, first)
        else:
            rest += uploads
        super()._prefill_many(model, rest)

    def _join_together(self, model: Transcriber, handles: list[_Handle]) -> list[tuple[int, list[Emitted]]]:
        prompts = model.embedded_prompts([(h.job.wave, h.job.context, h.job.language) for h in handles])
        return self.rows.join_many(prompts, [handle.job.budget for handle in handles])

    def _step(self) -> None:
        started = time.perf_counter()
        try:
            emitted = self.rows.step()
        except Exception as exc:  # the step's rows are all suspect: fail every one, keep serving
            self._fail_handles(list(self._active.values()), self._typed(exc, "a recognition step failed"))
            return
        self._deliver(emitted)
        seconds = time.perf_counter() - started
        self.pace.observe_step(seconds)
        self._tell_listeners(seconds, None)

    def _deliver(self, emitted: list[Emitted]) -> None:
        now = time.monotonic()
        for token in emitted:
            handle = self._active[token.row]
            finish = None
            if token.finished:
                finish = "stop" if token.token in self.rows.stop else "length"
            handle.deliver(
                DecodedToken(
                    token=token.token,
                    index=handle.tokens,
                    logprob=token.logprob,
                    queue_seconds=handle.admitted - handle.submitted,
                    elapsed_seconds=now - handle.submitted,
                    finish_reason=finish,
                )
            )
            handle.tokens += 1
            if finish is not None:
                handle.deliver(END)
                del self._active[token.row]
                self.pace.observe_request(handle.tokens)
