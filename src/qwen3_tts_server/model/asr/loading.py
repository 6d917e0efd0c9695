"""A Qwen3-ASR or Qwen3-ForcedAligner checkpoint loaded: its configuration read, the audio encoder and the text
decoder built on the meta device and filled from the safetensors files (one, or shards), the text tokenizer with
its added tokens, and the output head: the embedding table when tied (the 0.6B transcriber), its own matrix
otherwise (the aligner's 5000 timestamp classes).

With `quantize` the decoder's layers take the packed int8/int4 weights of `model/quantization.py` and, on a CPU,
the head takes int8 (the tied table stays in float for the embedding lookups). The audio encoder runs once per
clip over many tokens at a time, bound by arithmetic rather than by reading weights: it keeps the model's dtype.
On a CPU in float32 the float linear layers left are reordered for oneDNN once (`model/cpu_linear.py`), a tied
head as a copy of its own while the embedding table stays memory-mapped in the file. So are bfloat16 ones on a CPU
that multiplies bfloat16 natively (a live pass's encoding 1.23x faster so), but a head tied to the table."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...errors import CheckpointError, ConfigurationError
from ..checkpoint import checkpoint_fingerprint, load_weights, read_json, resolve_checkpoint, weight_files
from ..cpu_linear import prepack_linears
from ..device import cpu_multiplies_bfloat16, parse_device, parse_dtype
from ..footprint import free_memory_bytes
from ..layers import fuse_projections
from ..quantization import (
    Int8Linear,
    PackedLinear,
    decoder_linears,
    parse_quantization,
    quantize_linears,
    release_unused_codes,
)
from ..text_tokenizer import TextTokenizer
from .decoder import AsrDecoder
from .encoder import AudioEncoder, AudioEncoderConfig, sinusoid_positions

REQUIRED_FILES = ("config.json", "vocab.json", "merges.txt", "tokenizer_config.json")
ALIGNER_TYPE = "qwen3_forced_aligner"
TRANSCRIBER_TYPE = "qwen3_asr_thinker"
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")  # the official generate()'s end-of-sequence ids
# A prompt's prefill (hundreds of audio tokens; a live pass's tens) multiplies its int8 layers by a dense product
# from this many rows on (`PackedLinear.dense_from_rows`): in float32, 1.6x faster than the packed kernel at 410
# rows on an AVX2 CPU; in bfloat16 where the CPU has its instructions, as fast at 16 rows, 1.4x at 32 and 1.9x at
# 128 on an AVX512-BF16 one (the 0.6B decoder's whole prefill, dequantisation included: benchmarks/int8_prefill.py).
DENSE_FROM_ROWS = {None: 32, torch.bfloat16: 16}
PREFILL_WEIGHTS = ("auto", "kept", "converted")
# `auto` keeps the dequantised copy where the dense product is bfloat16 and the copy takes at most this share of the
# memory free after loading (0.88 GB for the 0.6B decoder).
KEPT_SHARE_OF_FREE_MEMORY = 0.25


@dataclass(frozen=True)
class AsrTokens:
    audio_pad: int
    stop: frozenset[int]
    timestamp: int | None  # the aligner's slot token


class Thinker(nn.Module):
    """The checkpoint's `thinker.*` modules, named as stored; a tied head is attached after loading."""

    def __init__(self, config: dict[str, Any], own_head: bool):
        super().__init__()
        self.audio_tower = AudioEncoder(AudioEncoderConfig.parse(config["audio_config"]))
        self.model = AsrDecoder(config["text_config"])
        rows = int(config.get("classify_num") or config["text_config"]["vocab_size"])
        self.lm_head: nn.Module | None = nn.Linear(self.model.cfg.hidden_size, rows, bias=False) if own_head else None

    def tie_head(self) -> None:
        """The head as a linear layer over the embedding table itself (no copy)."""
        table = self.model.embed_tokens.weight
        head = nn.Linear(table.shape[1], table.shape[0], bias=False, device="meta")
        head.weight = table
        self.lm_head = head


class AsrWeights(nn.Module):
    def __init__(self, config: dict[str, Any], own_head: bool):
        super().__init__()
        self.thinker = Thinker(config, own_head)


@dataclass
class AsrCheckpoint:
    """A loaded transcriber (`kind` "asr") or forced aligner (`kind` "forced_aligner")."""

    directory: Path
    kind: str
    encoder: AudioEncoder
    decoder: AsrDecoder
    head: nn.Module  # hidden -> logits over the vocabulary, or over the aligner's timestamp steps
    tokenizer: TextTokenizer
    tokens: AsrTokens
    languages: tuple[str, ...]  # what the checkpoint says it supports (config.json `support_languages`)
    step_ms: float  # the aligner's timestamp step; 0 for a transcriber
    fingerprint: str
    quantization: str | None = None  # the decoder's weight quantisation
    quantization_failure: str | None = None  # why the quantisation asked for was not applied

    @property
    def description(self) -> AsrDescription:
        return AsrDescription(self.kind, self.languages)

    @property
    def device(self) -> torch.device:
        return self.decoder.norm.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.decoder.norm.weight.dtype


def _kind(config: dict[str, Any]) -> str:
    thinker_type = config.get("thinker_config", {}).get("model_type")
    if config.get("model_type") != "qwen3_asr" or thinker_type not in (ALIGNER_TYPE, TRANSCRIBER_TYPE):
        raise CheckpointError(
            f"config.json describes a {config.get('model_type')!r} model ({thinker_type!r}); a Qwen3-ASR or "
            "Qwen3-ForcedAligner checkpoint was expected"
        )
    return "forced_aligner" if thinker_type == ALIGNER_TYPE else "asr"


@dataclass(frozen=True)
class AsrDescription:
    """What a recognition checkpoint is, read from its config without its weights."""

    kind: str  # "asr" or "forced_aligner"
    languages: tuple[str, ...]


def is_asr_config(config: dict[str, Any]) -> bool:
    return config.get("model_type") == "qwen3_asr"


def asr_fingerprint(directory: Path, files: list[Path] | None = None) -> str:
    """`checkpoint_fingerprint` of a recognition checkpoint: its config and its weight files (`files`, if known)."""
    files = files if files is not None else weight_files(directory)
    return checkpoint_fingerprint(directory, ["config.json", *(path.name for path in files)])


def describe_asr_checkpoint(name_or_path: str | os.PathLike) -> AsrDescription:
    """A checkpoint directory's or hub id's kind and languages (its config only)."""
    config = read_json(resolve_checkpoint(name_or_path, REQUIRED_FILES) / "config.json")
    return AsrDescription(_kind(config), tuple(config.get("support_languages") or ()))


def _token(tokenizer: TextTokenizer, content: str, directory: Path) -> int:
    token = tokenizer.token_id(content)
    if token is None:
        raise CheckpointError(f"the tokenizer of {directory} lacks {content}")
    return token


def _prepare_dense_prefill(decoder: nn.Module, quantization: str, dtype: torch.dtype, prefill_weights: str) -> None:
    """Long prefills of the quantised layers through a dense product (`DENSE_FROM_ROWS`), in bfloat16 where the CPU
    multiplies it; w8a8 without bfloat16 instructions keeps fbgemm's integer product for every row, faster than a
    float32 one. The int8 layers keep their dense weights between calls if `prefill_weights` says so."""
    dense_dtype = torch.bfloat16 if cpu_multiplies_bfloat16() else None
    layers = [layer for layer in decoder.modules() if isinstance(layer, PackedLinear)]
    if quantization == "w8a8" and dense_dtype is None:  # fbgemm multiplies every row
        return
    for layer in layers:
        layer.dense_from_rows, layer.dense_dtype = DENSE_FROM_ROWS[dense_dtype], dense_dtype
    int8 = [layer for layer in layers if isinstance(layer, Int8Linear)]
    size = (dense_dtype or dtype).itemsize * sum(layer.weight.numel() for layer in int8)
    fits = size <= KEPT_SHARE_OF_FREE_MEMORY * free_memory_bytes(torch.device("cpu"))
    if prefill_weights == "kept" or (prefill_weights == "auto" and dense_dtype is not None and fits):
        for layer in int8:
            layer.keep_dense_weights(dtype)


def load_asr_checkpoint(
    name_or_path: str | os.PathLike,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    quantize: str | None = None,
    prefill_weights: str = "auto",
) -> AsrCheckpoint:
    """A checkpoint directory or hub id loaded on `device` in `dtype`, its decoder quantised if asked; with
    `prefill_weights` "kept" (or "auto", where it fits) its int8 layers keep dequantised weights for prefills."""
    if prefill_weights not in PREFILL_WEIGHTS:  # refused whatever the precision, not only where it would apply
        raise ConfigurationError(
            f"unknown prefill_weights {prefill_weights!r}; choose one of {', '.join(PREFILL_WEIGHTS)}",
            param="prefill_weights",
        )
    device = parse_device(device)
    dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    quantization = parse_quantization(quantize, device)
    directory = resolve_checkpoint(name_or_path, REQUIRED_FILES)
    config = read_json(directory / "config.json")
    kind = _kind(config)
    thinker_config = config["thinker_config"]
    tied = bool(thinker_config["text_config"].get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    own_head = kind == "forced_aligner" or not tied
    with torch.device("meta"):
        weights = AsrWeights(thinker_config, own_head)
    thinker = weights.thinker
    files = weight_files(directory)
    # Quantised on a CPU from the dtype they are stored in, never held in float32 on the way.
    stored = {f"thinker.model.{path}.weight" for path in decoder_linears(thinker.model)} if quantization else set()
    if quantization and device.type == "cpu" and own_head:
        stored.add("thinker.lm_head.weight")
    cpu_float32 = device.type == "cpu" and dtype == torch.float32
    # On a CPU in float32 the embedding table stays in the file, memory-mapped: a lookup reads a few of its rows,
    # and the head that is tied to it multiplies a reordered copy (made below, or the int8 one) instead.
    mapped = {"thinker.model.embed_tokens.weight"} if cpu_float32 and not own_head else set()
    if device.type == "cpu":
        load_weights(weights, files, device, dtype, prefixes=("thinker.",), stored=stored, mapped=mapped)
    else:
        load_weights(weights, files, device, dtype, prefixes=("thinker.",))
    encoder = thinker.audio_tower
    encoder.positions = sinusoid_positions(encoder.config.max_positions, encoder.config.width).to(device)
    table = thinker.model.embed_tokens
    if table.weight.dtype != dtype:
        table.output_dtype = dtype
    if not own_head:
        thinker.tie_head()
    fuse_projections(thinker.model)
    failure = None
    if quantization is not None:
        targets = [(owner, name, quantization) for owner, name in decoder_linears(thinker.model).values()]
        if device.type == "cpu":  # 8 bits keep the logits close, in int4 too
            targets.append((thinker, "lm_head", "w8a8" if quantization == "w8a8" else "int8"))
        failure = quantize_linears(targets, quantization, device, dtype)
        if device.type == "cpu" and failure is None:
            _prepare_dense_prefill(thinker.model, quantization, dtype, prefill_weights)
            release_unused_codes(thinker)  # the head's too: one row a step, never a dense product
    if cpu_float32:
        if quantization is None and not own_head:  # the head's own float32 copy, to be reordered
            thinker.lm_head = nn.Linear(table.embedding_dim, table.num_embeddings, bias=False, device="meta")
            thinker.lm_head.weight = nn.Parameter(table.weight.float(), requires_grad=False)
        prepack_linears(thinker)  # every float32 linear layer left (the encoder's alone when quantised)
    elif device.type == "cpu" and dtype == torch.bfloat16 and cpu_multiplies_bfloat16():
        # every bfloat16 layer left but a head tied to the embedding table (a reordered copy would double it)
        prepack_linears(thinker, dtype, skip=(thinker.lm_head,) if not own_head else ())
    tokenizer = TextTokenizer.cached(directory)
    tokens = AsrTokens(
        audio_pad=int(thinker_config.get("audio_token_id") or _token(tokenizer, "<|audio_pad|>", directory)),
        stop=frozenset(_token(tokenizer, name, directory) for name in STOP_TOKENS),
        timestamp=int(config["timestamp_token_id"]) if kind == "forced_aligner" else None,
    )
    assert thinker.lm_head is not None
    return AsrCheckpoint(
        directory=directory,
        kind=kind,
        encoder=encoder.eval(),
        decoder=thinker.model.eval(),
        head=thinker.lm_head.eval(),
        tokenizer=tokenizer,
        tokens=tokens,
        languages=tuple(config.get("support_languages") or ()),
        step_ms=float(config.get("timestamp_segment_time") or 0.0) if kind == "forced_aligner" else 0.0,
        fingerprint=asr_fingerprint(directory, files),
        quantization=quantization if failure is None else None,
        quantization_failure=failure,
    )
