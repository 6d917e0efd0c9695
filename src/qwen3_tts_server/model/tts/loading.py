"""Reading a checkpoint (a local directory or a hub id) into the parts of a model, on a device and dtype."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..checkpoint import checkpoint_fingerprint, load_weights, read_json, resolve_checkpoint
from ..cpu_linear import prepack_linears
from ..device import parse_device, parse_dtype
from ..footprint import file_digest
from ..layers import Embedding, fuse_projections
from ..quantization import decoder_linears, head_linears, parse_quantization, quantize_talker
from ..text_tokenizer import TextTokenizer
from .codec import SpeechTokenizer
from .config import CodecDecoderConfig, CodecEncoderConfig, GenerationDefaults, TTSConfig
from .shared_parts import SHARED_PARTS, PartKey
from .speaker_encoder import SpeakerEncoder, SpeakerEncoderConfig
from .talker import Talker


def prepare_loading(name_or_path: str | os.PathLike) -> TTSConfig:
    """Everything a load of this checkpoint needs that holds the GIL for long stretches, done ahead, so that a
    server can load its model later without stalling its event loop: the text tokenizer (kept), and the torch
    modules that initialising weights on the meta device imports the first time (about a second). Returns the
    checkpoint's config."""
    directory = resolve_checkpoint(name_or_path)
    config = TTSConfig.parse(read_json(directory / "config.json"))
    TextTokenizer.cached(directory)
    with torch.device("meta"):
        nn.Embedding(1, 1)
    return config


class TTSWeights(nn.Module):
    """The modules of model.safetensors: the talker and, for Base models, the speaker encoder."""

    def __init__(self, config: TTSConfig):
        super().__init__()
        self.talker = Talker(config.talker)
        self.speaker_encoder = (
            SpeakerEncoder(SpeakerEncoderConfig.parse(config.speaker_encoder)) if config.model_type == "base" else None
        )


@dataclass
class CheckpointParts:
    """Everything a checkpoint holds, loaded: configurations, the text tokenizer and the weights."""

    directory: Path
    config: TTSConfig
    codec_config: CodecDecoderConfig
    defaults: GenerationDefaults
    tokenizer: TextTokenizer
    weights: TTSWeights
    speech_tokenizer: SpeechTokenizer
    fingerprint: str
    quantization: str | None = None  # the decoder layers' weight quantisation (`model/quantization.py`)
    quantization_failure: str | None = None  # why the quantisation asked for was not applied


def load_checkpoint(
    name_or_path: str | os.PathLike,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    quantize: str | None = None,
) -> CheckpointParts:
    """The parts of a checkpoint on `device`, in `dtype`, the talker's decoder layers quantised if asked."""
    device = parse_device(device)
    quantization = parse_quantization(quantize, device)
    if device.type == "cuda":  # float32 matrix products on tensor cores (TF32); bfloat16 is unaffected
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        # No cuDNN autotuning: the streaming codec meets a new input shape with every (rows, chunk frames) pair,
        # and timing each one's algorithms stalled every stream behind it for seconds (measured on an H100).
        torch.backends.cudnn.benchmark = False
    directory = resolve_checkpoint(name_or_path)
    dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    config = TTSConfig.parse(read_json(directory / "config.json"))
    codec_raw = read_json(directory / "speech_tokenizer" / "config.json")
    codec_config = CodecDecoderConfig.parse(codec_raw)
    # The codec encoder only serves voice cloning, so only Base models load it.
    encoder_config = CodecEncoderConfig.parse(codec_raw) if config.model_type == "base" else None
    defaults = GenerationDefaults.parse(read_json(directory / "generation_config.json"))
    tokenizer = TextTokenizer.cached(directory)
    with torch.device("meta"):
        weights = TTSWeights(config)
    load_weights(
        weights,
        directory / "model.safetensors",
        device,
        dtype,
        prefixes=("talker.", "speaker_encoder."),
        stored=_kept_as_stored(weights, dtype, quantization, device),
        mapped=_mapped_tables(weights, dtype),
    )
    speech_tokenizer = _speech_tokenizer(directory, codec_config, encoder_config, device, dtype)
    fuse_projections(weights)
    weights.eval()
    failure = quantize_talker(weights.talker, quantization) if quantization is not None else None
    if failure is not None:
        quantization = None
    if device.type == "cpu" and dtype == torch.float32:
        # Reordered for oneDNN, the float32 layers left compute a stream's frame step with the same bits alone or
        # batched with any others: seeded speech does not depend on the other requests (model/cpu_linear.py).
        prepack_linears(weights.talker)
    for table in weights.modules():
        if isinstance(table, Embedding) and table.weight.dtype != dtype:
            table.output_dtype = dtype
    return CheckpointParts(
        directory,
        config,
        codec_config,
        defaults,
        tokenizer,
        weights,
        speech_tokenizer,
        checkpoint_fingerprint(directory),
        quantization,
        failure,
    )


class _Part(nn.Module):
    """One part of the speech tokenizer under its name, as the file's keys name it."""

    def __init__(self, name: str, module: nn.Module):
        super().__init__()
        self.add_module(name, module)


def _speech_tokenizer(
    directory: Path,
    codec_config: CodecDecoderConfig,
    encoder_config: CodecEncoderConfig | None,
    device: torch.device,
    dtype: torch.dtype,
) -> SpeechTokenizer:
    """The speech tokenizer's decoder (and encoder, with its config), each shared with every loaded checkpoint
    whose speech tokenizer file has the same bytes (`SHARED_PARTS`)."""
    path = directory / "speech_tokenizer" / "model.safetensors"
    digest = file_digest(path)
    with torch.device("meta"):
        tokenizer = SpeechTokenizer(codec_config, encoder_config)

    def load(name: str) -> nn.Module:
        part = _Part(name, getattr(tokenizer, name))
        load_weights(part, path, device, dtype, prefixes=(f"{name}.",))
        fuse_projections(part)
        return getattr(part.eval(), name)

    for name in ("decoder", "encoder") if encoder_config is not None else ("decoder",):
        key = PartKey(digest, name, str(device), dtype)
        setattr(tokenizer, name, SHARED_PARTS.get(key, lambda name=name: load(name)))
    return tokenizer


def _kept_as_stored(
    weights: TTSWeights, dtype: torch.dtype, quantization: str | None, device: torch.device
) -> set[str]:
    """The weights loaded in the dtype the checkpoint stores them in: with float32 activations, the embedding tables
    (their rows are upcast exactly on lookup: half the memory of float32 tables); on a CPU with quantisation,
    the decoder layers' linear weights (quantised from what is stored, never held in float32)."""
    kept = set()
    if dtype == torch.float32:
        kept |= {f"{path}.weight" for path, table in weights.named_modules() if isinstance(table, Embedding)}
    if quantization is not None and device.type == "cpu":
        quantized = {**decoder_linears(weights.talker), **head_linears(weights.talker)}
        kept |= {f"talker.{path}.weight" for path in quantized}
    return kept


def _mapped_tables(weights: TTSWeights, dtype: torch.dtype) -> set[str]:
    """The text embedding table (a sixth of the 0.6B model) stays in the file, memory-mapped, with float32
    activations: a prompt reads a few of its 151,936 rows, so only those are ever resident."""
    return {"talker.model.text_embedding.weight"} if dtype == torch.float32 else set()
