"""A loaded Qwen3-TTS checkpoint: configuration, text tokenizer, talker and codec decoder, plus the
whole-request conveniences (`generate`, `decode`) built on the step-wise `FrameGenerator`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InvalidInputError
from .checkpoint import load_weights, read_json, resolve_checkpoint
from .codec import SpeechTokenizer
from .config import CodecDecoderConfig, GenerationDefaults, TTSConfig
from .generation import FrameGenerator
from .layers import fuse_projections
from .prompt import PromptBuilder, TalkerPrompt, VoiceRequest
from .sampling import SamplingParams
from .talker import Talker
from .text_tokenizer import TextTokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Frame budget when the caller sets none: generous for slow speech (a frame is 80 ms; a text token is
# usually spoken in 2-4 frames), never a cut-off for long input since it grows with the text.
BUDGET_BASE_FRAMES = 40
BUDGET_FRAMES_PER_TOKEN = 8
# Frames decoded per codec pass; longer code sequences are decoded in pieces with enough left context
# to cover the decoder's whole receptive field, so the pieces join exactly.
CODEC_CHUNK_FRAMES = 300


@dataclass
class Generated:
    """Codes of one request: (frames, num_code_groups) int64, and why generation stopped."""

    codes: np.ndarray
    finish_reason: str  # "eos" | "length"


def parse_device(name: str | torch.device) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise InvalidInputError(f"unknown device {name!r}: {exc}", param="device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError("CUDA is not available here; use --device cpu", param="device")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise InvalidInputError(f"no CUDA device {device.index}; {torch.cuda.device_count()} available", param="device")
    return device


def parse_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise InvalidInputError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}", param="dtype") from None


class Qwen3TTSModel:
    def __init__(
        self,
        directory: Path,
        config: TTSConfig,
        codec_config: CodecDecoderConfig,
        defaults: GenerationDefaults,
        tokenizer: TextTokenizer,
        talker: Talker,
        speech_tokenizer: SpeechTokenizer,
    ):
        self.directory = directory
        self.config = config
        self.codec_config = codec_config
        self.defaults = defaults
        self.tokenizer = tokenizer
        self.talker = talker
        self.codec = speech_tokenizer.decoder
        self.device = talker.codec_head.weight.device
        self.prompts = PromptBuilder(config, tokenizer, talker)

    @classmethod
    def load(
        cls, name_or_path: str | os.PathLike, device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32"
    ) -> Qwen3TTSModel:
        device = parse_device(device)
        directory = resolve_checkpoint(name_or_path)
        dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
        config = TTSConfig.parse(read_json(directory / "config.json"))
        codec_config = CodecDecoderConfig.parse(read_json(directory / "speech_tokenizer" / "config.json"))
        defaults = GenerationDefaults.parse(read_json(directory / "generation_config.json"))
        tokenizer = TextTokenizer.from_directory(directory)
        with torch.device("meta"):
            holder = torch.nn.Module()
            holder.talker = Talker(config.talker)
            speech_tokenizer = SpeechTokenizer(codec_config)
        load_weights(holder, directory / "model.safetensors", device, dtype, prefixes=("talker.",))
        load_weights(
            speech_tokenizer,
            directory / "speech_tokenizer" / "model.safetensors",
            device,
            dtype,
            prefixes=("decoder.",),
        )
        for module in (holder, speech_tokenizer):
            fuse_projections(module)
            module.eval()
        return cls(directory, config, codec_config, defaults, tokenizer, holder.talker, speech_tokenizer)

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

    def generate(
        self,
        requests: Sequence[VoiceRequest],
        params: SamplingParams | Sequence[SamplingParams],
        max_frames: int | None = None,
        on_frames: Callable[[int, int], None] | None = None,
        suppress_eos: bool = False,
    ) -> list[Generated]:
        """Generate the codes of several requests together, each row at its own pace. `on_frames(done,
        budget)` reports progress after every step: frames made so far and the sum of the rows' budgets."""
        if not requests:
            return []
        if isinstance(params, SamplingParams):
            params = [params] * len(requests)
        if max_frames is not None and max_frames < 1:
            raise InvalidInputError(f"max_frames must be >= 1, got {max_frames}", param="max_frames")
        prompts = [self.prompts.build(r) for r in requests]
        generator = FrameGenerator(self.talker, len(requests))
        row_of = {}
        total_budget = 0
        for i, (prompt, p) in enumerate(zip(prompts, params, strict=True)):
            p.validate()
            budget = max_frames if max_frames is not None else self.frame_budget(prompt)
            total_budget += budget
            row_of[generator.add(prompt, p, budget, suppress_eos)] = i
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

    @property
    def codec_context_frames(self) -> int:
        """Left context that covers the decoder's receptive field: the sliding-window transformer, the
        pre-conv, and a margin for the upsampling convolutions (under 12 frames for the real decoder)."""
        cfg = self.codec_config
        return cfg.stack.num_hidden_layers * (cfg.sliding_window - 1) + 2 + 16

    @torch.inference_mode()
    def decode(self, codes: np.ndarray | torch.Tensor) -> np.ndarray:
        """Codes (frames, num_quantizers) -> float32 mono audio at `sample_rate`, `samples_per_frame` a frame."""
        codes = torch.as_tensor(np.asarray(codes), dtype=torch.long, device=self.device)
        cfg = self.codec_config
        if codes.ndim != 2 or codes.shape[1] != cfg.num_quantizers:
            raise InvalidInputError(f"codes must have shape (frames, {cfg.num_quantizers}), got {tuple(codes.shape)}")
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= cfg.codebook_size):
            raise InvalidInputError(f"codes must lie in [0, {cfg.codebook_size})")
        frames = codes.shape[0]
        context = self.codec_context_frames
        pieces = []
        for start in range(0, frames, CODEC_CHUNK_FRAMES):
            end = min(start + CODEC_CHUNK_FRAMES, frames)
            left = min(start, context)
            audio = self.codec(codes[start - left : end].T[None])[0]
            pieces.append(audio[left * cfg.samples_per_frame :])
        if not pieces:
            return np.zeros(0, dtype=np.float32)
        return torch.cat(pieces).float().cpu().numpy()

    def frames_to_seconds(self, frames: int) -> float:
        return frames * self.samples_per_frame / self.sample_rate
