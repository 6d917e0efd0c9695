"""A loaded Qwen3-TTS model at run time: configuration, text prompts, talker and codec decoder, plus the
whole-request conveniences (`generate`, `decode`) built on the step-wise `FrameGenerator`. Reading a
checkpoint is `loading.py`'s; cloning a voice is `voice_cloning.py`'s."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import InvalidInputError
from ..quantization import quantization_state
from .codec_stream import CodecStreamState, StreamingCodecDecoder
from .compilation import StepCompiler, compile_frame_step
from .generation import FrameGenerator, RowRequest
from .loading import CheckpointParts, load_checkpoint
from .prompt import PromptBuilder, SpeechInput, TalkerPrompt, TokenizedInput
from .sampling import SamplingParams
from .traced_predictor import PredictorTraces
from .voice_cloning import VoiceEncoder
from .voice_prompt import VoicePrompt

# Frame budget when the caller sets none: generous for slow speech (a frame is 80 ms; a text token is
# usually spoken in 2-4 frames), never a cut-off for long input since it grows with the text.
BUDGET_BASE_FRAMES = 40
BUDGET_FRAMES_PER_TOKEN = 8
# Frames per codec pass when decoding whole sequences (pieces join exactly: the decoder is incremental).
CODEC_CHUNK_FRAMES = 300
PRIMED_STATES_KEPT = 16  # decoder states primed with in-context voices' reference codes


@dataclass
class Generated:
    """Codes of one request: (frames, num_code_groups) int64, and why generation stopped."""

    codes: np.ndarray
    finish_reason: str  # "eos" | "length"


class Qwen3TTSModel:
    def __init__(self, parts: CheckpointParts, trace_predictor: bool = False, compiled: bool = False):
        self.directory = parts.directory
        self.config = parts.config
        self.codec_config = parts.codec_config
        self.defaults = parts.defaults
        self.tokenizer = parts.tokenizer
        self.talker = parts.weights.talker
        self.codec = parts.speech_tokenizer.decoder
        self.codec_stream = StreamingCodecDecoder(self.codec)
        self.fingerprint = parts.fingerprint
        self.device = self.talker.device
        self.dtype = self.talker.dtype
        self.quantization = parts.quantization
        self.quantization_failure = parts.quantization_failure
        self.compiler: StepCompiler | None = None  # set when the frame step is compiled
        # The code predictor's passes traced on a CPU (`traced_predictor.py`), shared by every generator of the model.
        self.predictor_traces = PredictorTraces(
            self.talker.code_predictor,
            trace_predictor,
            compiled,
            key=(self.fingerprint, str(self.dtype), self.quantization_state),
        )
        self.prompts = PromptBuilder(parts.config, parts.tokenizer, self.talker, parts.fingerprint)
        self.voice_encoder = VoiceEncoder(
            parts.weights.speaker_encoder,
            parts.speech_tokenizer.encoder,
            self.prompts,
            self.device,
            parts.config.model_type,
        )
        self._primed: dict[str, CodecStreamState] = {}  # by voice prompt id, least recently used first
        self._primed_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        name_or_path: str | os.PathLike,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
        quantize: str | None = None,
        compile: bool = False,
        trace_predictor: bool = True,
    ) -> Qwen3TTSModel:
        """`quantize`: the decoder layers' weights in int8, int4 or fp8 (`model/quantization.py`); `compile`: the frame
        step compiled (`compilation.py`), on each shape's first step (the warm-up runs them); `trace_predictor`: on a
        CPU, the code predictor's passes traced (`traced_predictor.py`), unless the step is compiled."""
        model = cls(load_checkpoint(name_or_path, device, dtype, quantize), trace_predictor, compiled=compile)
        if compile:
            model.compiler = compile_frame_step(model.talker)
        return model

    @property
    def quantization_state(self) -> str:
        return quantization_state(self.quantization, self.quantization_failure)

    @property
    def model_type(self) -> str:
        return self.config.model_type

    @property
    def sample_rate(self) -> int:
        return self.codec_config.output_sample_rate

    @property
    def samples_per_frame(self) -> int:
        return self.codec_config.samples_per_frame

    @property
    def speakers(self) -> list[str]:
        return self.prompts.speakers

    @property
    def languages(self) -> list[str]:
        return self.prompts.languages

    def sampling(self, **overrides) -> SamplingParams:
        """Sampling settings: generation_config.json defaults with the given overrides."""
        return SamplingParams.from_defaults(self.defaults, **overrides)

    @staticmethod
    def frame_budget(prompt: TalkerPrompt) -> int:
        return BUDGET_BASE_FRAMES + BUDGET_FRAMES_PER_TOKEN * prompt.text_tokens

    def add_row(
        self,
        generator: FrameGenerator,
        request: TokenizedInput,
        params: SamplingParams,
        max_frames: int | None = None,
        suppress_eos: bool = False,
        frame_cap: int | None = None,
    ) -> tuple[int, int]:
        """Prefill a prepared input into a free row: returns (row, frame budget) (`row_request`)."""
        row_request = self.row_request(request, params, max_frames, suppress_eos, frame_cap)
        return generator.add_many([row_request])[0], row_request.max_frames

    def row_request(
        self,
        request: TokenizedInput,
        params: SamplingParams,
        max_frames: int | None = None,
        suppress_eos: bool = False,
        frame_cap: int | None = None,
    ) -> RowRequest:
        """What a row is prefilled with for a prepared input: its prompt embedded, and its frame budget:
        `max_frames`, else the text-length default, never above `frame_cap`."""
        if max_frames is not None and max_frames < 1:
            raise InvalidInputError(f"max_frames must be >= 1, got {max_frames}", param="max_frames")
        prompt = self.prompts.embed(request)
        budget = max_frames if max_frames is not None else self.frame_budget(prompt)
        if frame_cap is not None:
            budget = min(budget, frame_cap)
        return RowRequest(prompt, params, budget, suppress_eos)

    def generate(
        self,
        requests: Sequence[SpeechInput | TokenizedInput],
        params: SamplingParams | Sequence[SamplingParams],
        max_frames: int | None = None,
        on_frames: Callable[[int, int], None] | None = None,
        suppress_eos: bool = False,
    ) -> list[Generated]:
        """Generate the codes of several requests together, each row at its own pace (inputs not yet prepared
        are checked and tokenized first). `on_frames(done, budget)` reports progress after every step: frames
        made so far and the sum of the rows' budgets."""
        if not requests:
            return []
        if isinstance(params, SamplingParams):
            params = [params] * len(requests)
        generator = FrameGenerator(self.talker, len(requests), traces=self.predictor_traces)
        row_of = {}
        total_budget = 0
        for i, (request, p) in enumerate(zip(requests, params, strict=True)):
            prepared = request if isinstance(request, TokenizedInput) else self.prompts.prepare(request)
            row, budget = self.add_row(generator, prepared, p, max_frames, suppress_eos)
            total_budget += budget
            row_of[row] = i
        frames: list[list[torch.Tensor]] = [[] for _ in requests]
        reasons = ["length"] * len(requests)
        done = 0
        while generator.active:
            step = generator.step()
            for frame in step:
                frames[row_of[frame.row]].append(frame.codes)
                if frame.finished:
                    reasons[row_of[frame.row]] = frame.finished
            done += len(step)
            if on_frames:
                on_frames(done, total_budget)
        return [
            Generated(codes=torch.stack(f).cpu().numpy().astype(np.int64), finish_reason=reason)
            for f, reason in zip(frames, reasons, strict=True)
        ]

    @torch.inference_mode()
    def decode(self, codes: np.ndarray | torch.Tensor, context: np.ndarray | torch.Tensor | None = None) -> np.ndarray:
        """Codes (frames, num_quantizers) -> float32 mono audio at `sample_rate`, `samples_per_frame` a frame.
        `context`: codes that precede them (an in-context voice's reference), decoded but not returned.
        Long sequences go through the incremental decoder in pieces, so memory stays bounded and nothing
        is decoded twice."""
        codes = self._check_codes(codes)
        state = self.codec_stream.new_state()
        if context is not None:
            self._prime(state, context)
        pieces = [
            self.codec_stream.decode([state], codes[None, start : start + CODEC_CHUNK_FRAMES])[0]
            for start in range(0, len(codes), CODEC_CHUNK_FRAMES)
        ]
        if not pieces:
            return np.zeros(0, dtype=np.float32)
        return torch.cat(pieces).float().cpu().numpy()

    def codec_state(self, voice: VoicePrompt | None = None) -> CodecStreamState:
        """A fresh incremental decoder state for a stream. For an in-context voice it has already decoded the
        reference codes, as the official decode runs over reference + new codes; primed states are cached."""
        if voice is None or not voice.in_context:
            return self.codec_stream.new_state()
        with self._primed_lock:
            primed = self._primed.pop(voice.id, None)
            if primed is None:
                primed = self.codec_stream.new_state()
                self._prime(primed, voice.ref_codes)
            self._primed[voice.id] = primed
            while len(self._primed) > PRIMED_STATES_KEPT:
                self._primed.pop(next(iter(self._primed)))
        # Decoding replaces a state's buffers rather than writing into them, so the tensors can be shared.
        return CodecStreamState(dict(primed.buffers), primed.frames)

    def _prime(self, state: CodecStreamState, context: np.ndarray | torch.Tensor) -> None:
        context = self._check_codes(context)
        for start in range(0, len(context), CODEC_CHUNK_FRAMES):
            self.codec_stream.decode([state], context[None, start : start + CODEC_CHUNK_FRAMES])

    def _check_codes(self, codes: np.ndarray | torch.Tensor) -> torch.Tensor:
        cfg = self.codec_config
        codes = torch.as_tensor(np.asarray(codes), dtype=torch.long, device=self.device)
        if codes.ndim != 2 or codes.shape[1] != cfg.num_quantizers:
            raise InvalidInputError(f"codes must have shape (frames, {cfg.num_quantizers}), got {tuple(codes.shape)}")
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= cfg.codebook_size):
            raise InvalidInputError(f"codes must lie in [0, {cfg.codebook_size})")
        return codes

    def frames_to_seconds(self, frames: int) -> float:
        return frames * self.samples_per_frame / self.sample_rate
