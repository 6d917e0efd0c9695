"""A loaded Qwen3-TTS checkpoint: configuration, text tokenizer, talker and codec decoder, plus the
whole-request conveniences (`generate`, `decode`) built on the step-wise `FrameGenerator`."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from ..errors import InvalidInputError
from .checkpoint import checkpoint_fingerprint, load_weights, read_json, resolve_checkpoint
from .codec import SpeechTokenizer
from .codec_stream import CodecStreamState, StreamingCodecDecoder
from .config import CodecDecoderConfig, CodecEncoderConfig, GenerationDefaults, TTSConfig
from .generation import FrameGenerator
from .layers import fuse_projections
from .prompt import PromptBuilder, TalkerPrompt, VoiceRequest
from .sampling import REQUEST_OVERRIDES, SamplingParams
from .speaker_encoder import SpeakerEncoder, SpeakerEncoderConfig
from .talker import Talker
from .text_tokenizer import TextTokenizer
from .voice_prompt import Mode, VoicePrompt, voice_prompt_id

if TYPE_CHECKING:  # only the type: the model layer does no audio I/O
    from ..audio.reference import ReferenceAudio

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
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


class TTSWeights(nn.Module):
    """The modules of model.safetensors: the talker and, for Base models, the speaker encoder."""

    def __init__(self, config: TTSConfig):
        super().__init__()
        self.talker = Talker(config.talker)
        self.speaker_encoder = (
            SpeakerEncoder(SpeakerEncoderConfig.parse(config.speaker_encoder)) if config.model_type == "base" else None
        )


class Qwen3TTSModel:
    def __init__(
        self,
        directory: Path,
        config: TTSConfig,
        codec_config: CodecDecoderConfig,
        defaults: GenerationDefaults,
        tokenizer: TextTokenizer,
        weights: TTSWeights,
        speech_tokenizer: SpeechTokenizer,
        fingerprint: str,
    ):
        self.directory = directory
        self.config = config
        self.codec_config = codec_config
        self.defaults = defaults
        self.tokenizer = tokenizer
        self.talker = weights.talker
        self.speaker_encoder = weights.speaker_encoder
        self.codec = speech_tokenizer.decoder
        self.codec_stream = StreamingCodecDecoder(self.codec)
        self.codec_encoder = speech_tokenizer.encoder
        self.fingerprint = fingerprint
        self.device = self.talker.codec_head.weight.device
        self.dtype = self.talker.codec_head.weight.dtype
        self.prompts = PromptBuilder(config, tokenizer, self.talker, fingerprint)
        self._primed: dict[str, CodecStreamState] = {}  # by voice prompt id, least recently used first
        self._primed_lock = threading.Lock()

    @classmethod
    def load(
        cls, name_or_path: str | os.PathLike, device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32"
    ) -> Qwen3TTSModel:
        device = parse_device(device)
        if device.type == "cuda":  # float32 matrix products on tensor cores (TF32); bfloat16 is unaffected
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        directory = resolve_checkpoint(name_or_path)
        dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
        config = TTSConfig.parse(read_json(directory / "config.json"))
        codec_raw = read_json(directory / "speech_tokenizer" / "config.json")
        codec_config = CodecDecoderConfig.parse(codec_raw)
        # The codec encoder only serves voice cloning, so only Base models load it.
        encoder_config = CodecEncoderConfig.parse(codec_raw) if config.model_type == "base" else None
        defaults = GenerationDefaults.parse(read_json(directory / "generation_config.json"))
        tokenizer = TextTokenizer.from_directory(directory)
        with torch.device("meta"):
            weights = TTSWeights(config)
            speech_tokenizer = SpeechTokenizer(codec_config, encoder_config)
        load_weights(weights, directory / "model.safetensors", device, dtype, prefixes=("talker.", "speaker_encoder."))
        load_weights(
            speech_tokenizer,
            directory / "speech_tokenizer" / "model.safetensors",
            device,
            dtype,
            prefixes=("decoder.", "encoder."),
        )
        for module in (weights, speech_tokenizer):
            fuse_projections(module)
            module.eval()
        return cls(
            directory,
            config,
            codec_config,
            defaults,
            tokenizer,
            weights,
            speech_tokenizer,
            checkpoint_fingerprint(directory),
        )

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

    def sampling_for(self, source: object) -> SamplingParams:
        """Sampling settings with the overrides a request carries as attributes (None: the default)."""
        return self.sampling(**{name: getattr(source, name) for name in REQUEST_OVERRIDES})

    @staticmethod
    def frame_budget(prompt: TalkerPrompt) -> int:
        return BUDGET_BASE_FRAMES + BUDGET_FRAMES_PER_TOKEN * prompt.text_tokens

    def add_row(
        self,
        generator: FrameGenerator,
        request: VoiceRequest,
        params: SamplingParams,
        max_frames: int | None = None,
        suppress_eos: bool = False,
        frame_cap: int | None = None,
    ) -> tuple[int, int]:
        """Validate a request and prefill it into a free row: returns (row, frame budget). The budget is
        `max_frames`, else the text-length default, never above `frame_cap`."""
        if max_frames is not None and max_frames < 1:
            raise InvalidInputError(f"max_frames must be >= 1, got {max_frames}", param="max_frames")
        prompt = self.prompts.build(request)
        params.validate()
        budget = max_frames if max_frames is not None else self.frame_budget(prompt)
        if frame_cap is not None:
            budget = min(budget, frame_cap)
        return generator.add(prompt, params, budget, suppress_eos), budget

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
        generator = FrameGenerator(self.talker, len(requests))
        row_of = {}
        total_budget = 0
        for i, (request, p) in enumerate(zip(requests, params, strict=True)):
            row, budget = self.add_row(generator, request, p, max_frames, suppress_eos)
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

    @torch.inference_mode()
    def voice_prompt_key(
        self, audio_sha256: str, ref_text: str | None, x_vector_only: bool
    ) -> tuple[str, Mode, str | None]:
        """(prompt id, mode, cleaned transcript) of the voice prompt that reference audio with this SHA-256
        would give: a cache can be consulted before the audio is decoded."""
        if self.speaker_encoder is None or self.codec_encoder is None:
            raise InvalidInputError(
                f"voice cloning needs a Base checkpoint (Qwen3-TTS-12Hz-*-Base); this is a {self.model_type} model",
                param="model",
            )
        ref_text = (ref_text or "").strip() or None
        if not x_vector_only and ref_text is None:
            raise InvalidInputError(
                "in-context cloning needs ref_text, the transcript of the reference audio "
                "(or use x-vector-only mode, which needs none)",
                param="ref_text",
            )
        mode: Mode = "x_vector" if x_vector_only else "in_context"
        return voice_prompt_id(audio_sha256, ref_text, mode, self.fingerprint), mode, ref_text

    def create_voice_prompt(
        self, reference: ReferenceAudio, ref_text: str | None = None, x_vector_only: bool = False
    ) -> VoicePrompt:
        """Clone a voice from reference audio (Base models): the speaker embedding, plus in in-context mode
        (the default) the reference's codec codes and its transcript `ref_text`."""
        prompt_id, mode, ref_text = self.voice_prompt_key(reference.sha256, ref_text, x_vector_only)
        samples = torch.from_numpy(reference.samples)
        # The mel front end runs on the CPU in float32, as the official one does; the encoder on the device.
        embedding = self.speaker_encoder.embed(samples).float().cpu()
        codes = None if x_vector_only else self.codec_encoder.encode(samples[None].to(self.device))[0].cpu()
        return VoicePrompt(
            id=prompt_id,
            mode=mode,
            checkpoint=self.fingerprint,
            speaker_embedding=embedding,
            ref_codes=codes,
            ref_text=None if x_vector_only else ref_text,
        )

    def frames_to_seconds(self, frames: int) -> float:
        return frames * self.samples_per_frame / self.sample_rate
