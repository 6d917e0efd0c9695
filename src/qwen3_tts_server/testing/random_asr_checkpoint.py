"""Random-weight Qwen3-ASR and Qwen3-ForcedAligner checkpoints in the official on-disk format (`make-test-model
--type asr|forced_aligner`).

The official `qwen-asr` 0.0.6 package (its transformers backend) loads them with no missing or unexpected weight:
config.json (the nested thinker / audio / text configs, every key the published files carry), the generation and
preprocessor configs, a chat template rendering the official prompt, the tokenizer (the real Qwen text vocabulary
with Qwen3-ASR's added tokens at their published ids) and model.safetensors. `tiny` builds in seconds for the
tests; `0.6b` and `1.7b` have the published dimensions (the aligner exists in 0.6B only) and are stored in
bfloat16, as the published files are. The same seed gives the same bytes.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from .qwen_vocabulary import (
    ALIGNER_ADDED_TOKENS,
    ASR_ADDED_TOKENS,
    ASR_NOT_SPECIAL,
    added_token_id,
    tokenizer_config,
    vocabulary_files,
)
from .random_checkpoint import FIRST_ADDED_ID, PRETRAINED_CONFIG_DEFAULTS

ASR_TYPES = ("asr", "forced_aligner")
TRANSFORMERS_VERSION = "4.57.6"  # the version qwen-asr 0.0.6 pins
ASR_VOCAB_ROWS = 151936  # embedding rows of Qwen3-ASR (the id space padded past the tokens)
ALIGNER_VOCAB_ROWS = 152064  # embedding rows of Qwen3-ForcedAligner
CLASSIFY_NUM = 5000  # the aligner's head: one class per 80 ms
TIMESTAMP_SEGMENT_MS = 80
USER_TOKEN_ID = 872  # "user" in the Qwen vocabulary, as the published config has it
MEL_BINS = 128

LANGUAGES = (
    "Chinese", "English", "Cantonese", "Arabic", "German", "French", "Spanish", "Portuguese", "Indonesian", "Italian",
    "Korean", "Russian", "Thai", "Vietnamese", "Japanese", "Turkish", "Hindi", "Malay", "Dutch", "Swedish", "Danish",
    "Finnish", "Polish", "Czech", "Filipino", "Persian", "Greek", "Romanian", "Hungarian", "Macedonian",
)  # fmt: skip
ALIGNER_LANGUAGES = (
    "Chinese", "English", "Cantonese", "French", "German", "Italian", "Japanese", "Korean", "Portuguese", "Russian",
    "Spanish",
)  # fmt: skip


@dataclass(frozen=True)
class AsrDimensions:
    encoder_width: int  # audio_config.d_model
    encoder_layers: int
    encoder_heads: int
    encoder_ffn: int
    decoder_width: int  # text_config.hidden_size, and the encoder's output_dim
    decoder_layers: int
    decoder_heads: int
    decoder_kv_heads: int
    decoder_ffn: int
    head_dim: int = 128
    conv_channels: int = 480  # audio_config.downsample_hidden_size
    tied_head: bool = True  # a transcriber's output head is its embedding table (and not stored)

    @property
    def mrope_section(self) -> list[int]:
        """The published [24, 20, 20] split of the rotary frequencies, scaled to the head (its sum is head_dim/2).
        The three position streams are always equal, so any split gives ordinary 1-D RoPE."""
        half = self.head_dim // 2
        rest = half - 2 * (half * 20 // 64)
        return [rest, half * 20 // 64, half * 20 // 64]


DIMENSIONS = {
    ("asr", "tiny"): AsrDimensions(64, 2, 4, 128, 64, 2, 4, 2, 128, head_dim=16, conv_channels=32),
    # wider than tiny, with a head of its own: parity beyond one shape (tests/asr_cases.py)
    ("asr", "small"): AsrDimensions(128, 3, 4, 256, 128, 3, 8, 4, 256, head_dim=32, conv_channels=32, tied_head=False),
    ("asr", "0.6b"): AsrDimensions(896, 18, 14, 3584, 1024, 28, 16, 8, 3072),
    ("asr", "1.7b"): AsrDimensions(1024, 24, 16, 4096, 2048, 28, 16, 8, 6144),
    ("forced_aligner", "tiny"): AsrDimensions(64, 2, 4, 128, 64, 2, 4, 2, 128, head_dim=16, conv_channels=32),
    ("forced_aligner", "0.6b"): AsrDimensions(1024, 24, 16, 4096, 1024, 28, 16, 8, 3072),
}
ASR_SIZES = tuple(dict.fromkeys(size for _, size in DIMENSIONS))
TEST_SIZES = ("tiny", "small")  # stored in float32; the published sizes in bfloat16


def _added(model_type: str) -> tuple[str, ...]:
    return ALIGNER_ADDED_TOKENS if model_type == "forced_aligner" else ASR_ADDED_TOKENS


def asr_token_id(content: str, model_type: str = "asr") -> int:
    """The id of an added token (`<|audio_pad|>`, `<asr_text>`, ...) in a checkpoint of `model_type`."""
    return added_token_id(content, FIRST_ADDED_ID, _added(model_type))


def _config(d: AsrDimensions, model_type: str, dtype: str) -> dict[str, Any]:
    aligner = model_type == "forced_aligner"
    tied = d.tied_head and not aligner  # the aligner's head has CLASSIFY_NUM rows: it cannot be the embedding table
    audio = {
        **PRETRAINED_CONFIG_DEFAULTS,
        "model_type": "qwen3_asr_audio_encoder",
        "num_mel_bins": MEL_BINS,
        "d_model": d.encoder_width,
        "encoder_layers": d.encoder_layers,
        "num_hidden_layers": d.encoder_layers,
        "encoder_attention_heads": d.encoder_heads,
        "encoder_ffn_dim": d.encoder_ffn,
        "downsample_hidden_size": d.conv_channels,
        "output_dim": d.decoder_width,
        # The published values: the config class's defaults (100, 400) disagree with the processor, which counts
        # the audio tokens of 100-frame chunks (2 * n_window).
        "n_window": 50,
        "n_window_infer": 800,
        "conv_chunksize": 500,
        "max_source_positions": 1500,
        "activation_function": "gelu",
        "scale_embedding": False,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,  # transformers' default, which it writes for every config
        "dtype": dtype,
    }
    text = {
        **PRETRAINED_CONFIG_DEFAULTS,
        "model_type": "qwen3_asr_text",
        "vocab_size": ALIGNER_VOCAB_ROWS if aligner else ASR_VOCAB_ROWS,
        "hidden_size": d.decoder_width,
        "intermediate_size": d.decoder_ffn,
        "num_hidden_layers": d.decoder_layers,
        "num_attention_heads": d.decoder_heads,
        "num_key_value_heads": d.decoder_kv_heads,
        "head_dim": d.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": 65536,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        # Required: the official rotary embedding reads mrope_section from it (None fails to load).
        "rope_scaling": {
            "interleaved": True,
            "mrope_interleaved": True,
            "mrope_section": d.mrope_section,
            "rope_type": "default",
            "type": "default",
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "tie_word_embeddings": tied,
        "dtype": dtype,
    }
    thinker = {
        **PRETRAINED_CONFIG_DEFAULTS,
        # The official model builds the CLASSIFY_NUM-class head when "forced_aligner" is in this type.
        "model_type": "qwen3_forced_aligner" if aligner else "qwen3_asr_thinker",
        "audio_config": audio,
        "text_config": text,
        "audio_token_id": asr_token_id("<|audio_pad|>"),
        "audio_start_token_id": asr_token_id("<|audio_start|>"),
        "audio_end_token_id": asr_token_id("<|audio_end|>"),
        "user_token_id": USER_TOKEN_ID,
        "initializer_range": 0.02,
        "tie_word_embeddings": tied,
        "dtype": dtype,
    }
    config = {
        **PRETRAINED_CONFIG_DEFAULTS,
        "architectures": ["Qwen3ASRForConditionalGeneration"],
        "model_type": "qwen3_asr",  # the aligner's too: the one type the official package registers
        "support_languages": list(ALIGNER_LANGUAGES if aligner else LANGUAGES),
        "thinker_config": thinker,
        "tie_word_embeddings": tied,
        "dtype": dtype,
        "transformers_version": TRANSFORMERS_VERSION,
    }
    if aligner:
        thinker["classify_num"] = CLASSIFY_NUM
        config["timestamp_token_id"] = asr_token_id("<timestamp>", model_type)
        config["timestamp_segment_time"] = TIMESTAMP_SEGMENT_MS
    return config


# The official template renders (the system turn always, its content the context):
# <|im_start|>system\n{context}<|im_end|>\n<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|><|im_end|>\n
# <|im_start|>assistant\n
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'audio' -%}{{- '<|audio_start|><|audio_pad|><|audio_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def asr_config_files(size: str, model_type: str) -> dict[str, dict[str, Any]]:
    """Every JSON file of a checkpoint, by name."""
    if (model_type, size) not in DIMENSIONS:
        sizes = ", ".join(s for t, s in DIMENSIONS if t == model_type) or "none"
        raise ValueError(f"no {size!r} {model_type} checkpoint; sizes: {sizes}")
    tokenizer = tokenizer_config(FIRST_ADDED_ID, _added(model_type), ASR_NOT_SPECIAL)
    # The official processor reads tokenizer.audio_token and friends, which transformers makes of these names. No
    # `padding_side` here: it would override the processor's left padding of batched prompts.
    tokenizer["extra_special_tokens"] = {
        "audio_bos_token": "<|audio_start|>",
        "audio_eos_token": "<|audio_end|>",
        "audio_token": "<|audio_pad|>",
        "image_token": "<|image_pad|>",
        "video_token": "<|video_pad|>",
        "vision_bos_token": "<|vision_start|>",
        "vision_eos_token": "<|vision_end|>",
    }
    end, pad = asr_token_id("<|im_end|>"), asr_token_id("<|endoftext|>")
    dtype = "float32" if size in TEST_SIZES else "bfloat16"
    return {
        "config.json": _config(DIMENSIONS[model_type, size], model_type, dtype),
        # The transformers backend never reads it (its generate() runs the thinker, configured by config.json).
        "generation_config.json": {
            "do_sample": False,
            "eos_token_id": [end, pad],
            "pad_token_id": pad,
            "transformers_version": TRANSFORMERS_VERSION,
        },
        "preprocessor_config.json": {
            "feature_extractor_type": "WhisperFeatureExtractor",
            "processor_class": "Qwen3ASRProcessor",
            "feature_size": MEL_BINS,
            "sampling_rate": 16000,
            "hop_length": 160,
            "n_fft": 400,
            "chunk_length": 30,
            "n_samples": 480000,
            "nb_max_frames": 3000,
            "padding_side": "right",
            "padding_value": 0.0,
            "dither": 0.0,
            "return_attention_mask": True,
        },
        "chat_template.json": {"chat_template": CHAT_TEMPLATE},
        "tokenizer_config.json": tokenizer,
    }


def _weight_shapes(d: AsrDimensions, model_type: str) -> list[tuple[str, tuple[int, ...]]]:
    """Every stored tensor's name and shape, in a fixed order (the random draws follow it)."""
    enc, width, channels = "thinker.audio_tower", d.encoder_width, d.conv_channels
    frequencies = MEL_BINS
    for _ in range(3):  # three stride-2 convolutions
        frequencies = (frequencies + 1) // 2
    shapes = [
        (f"{enc}.conv2d1.weight", (channels, 1, 3, 3)),
        (f"{enc}.conv2d1.bias", (channels,)),
        (f"{enc}.conv2d2.weight", (channels, channels, 3, 3)),
        (f"{enc}.conv2d2.bias", (channels,)),
        (f"{enc}.conv2d3.weight", (channels, channels, 3, 3)),
        (f"{enc}.conv2d3.bias", (channels,)),
        (f"{enc}.conv_out.weight", (width, channels * frequencies)),
    ]
    for i in range(d.encoder_layers):
        layer = f"{enc}.layers.{i}"
        for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes += [(f"{layer}.self_attn.{projection}.weight", (width, width))]
            shapes += [(f"{layer}.self_attn.{projection}.bias", (width,))]
        shapes += [
            (f"{layer}.self_attn_layer_norm.weight", (width,)),
            (f"{layer}.self_attn_layer_norm.bias", (width,)),
            (f"{layer}.fc1.weight", (d.encoder_ffn, width)),
            (f"{layer}.fc1.bias", (d.encoder_ffn,)),
            (f"{layer}.fc2.weight", (width, d.encoder_ffn)),
            (f"{layer}.fc2.bias", (width,)),
            (f"{layer}.final_layer_norm.weight", (width,)),
            (f"{layer}.final_layer_norm.bias", (width,)),
        ]
    shapes += [
        (f"{enc}.ln_post.weight", (width,)),
        (f"{enc}.ln_post.bias", (width,)),
        (f"{enc}.proj1.weight", (width, width)),
        (f"{enc}.proj1.bias", (width,)),
        (f"{enc}.proj2.weight", (d.decoder_width, width)),
        (f"{enc}.proj2.bias", (d.decoder_width,)),
    ]
    hidden, queries, keys = d.decoder_width, d.decoder_heads * d.head_dim, d.decoder_kv_heads * d.head_dim
    aligner = model_type == "forced_aligner"
    shapes.append(("thinker.model.embed_tokens.weight", (ALIGNER_VOCAB_ROWS if aligner else ASR_VOCAB_ROWS, hidden)))
    for i in range(d.decoder_layers):
        layer = f"thinker.model.layers.{i}"
        shapes += [
            (f"{layer}.input_layernorm.weight", (hidden,)),
            (f"{layer}.self_attn.q_proj.weight", (queries, hidden)),
            (f"{layer}.self_attn.k_proj.weight", (keys, hidden)),
            (f"{layer}.self_attn.v_proj.weight", (keys, hidden)),
            (f"{layer}.self_attn.o_proj.weight", (hidden, queries)),
            (f"{layer}.self_attn.q_norm.weight", (d.head_dim,)),
            (f"{layer}.self_attn.k_norm.weight", (d.head_dim,)),
            (f"{layer}.post_attention_layernorm.weight", (hidden,)),
            (f"{layer}.mlp.gate_proj.weight", (d.decoder_ffn, hidden)),
            (f"{layer}.mlp.up_proj.weight", (d.decoder_ffn, hidden)),
            (f"{layer}.mlp.down_proj.weight", (hidden, d.decoder_ffn)),
        ]
    shapes.append(("thinker.model.norm.weight", (hidden,)))
    if aligner:
        shapes.append(("thinker.lm_head.weight", (CLASSIFY_NUM, hidden)))
    elif not d.tied_head:  # else the head is the embedding table, and not stored
        shapes.append(("thinker.lm_head.weight", (ASR_VOCAB_ROWS, hidden)))
    return shapes


# Residual branches' output projections drawn louder than 1/sqrt(fan_in): otherwise the residual stream carries
# little but the input token's embedding, and greedy decoding with the tied head repeats its last token forever
# whatever the audio (the output must depend on the audio, the context and the language to test anything).
RESIDUAL_OUTPUT_GAIN = 8.0
RESIDUAL_OUTPUTS = ("self_attn.o_proj.weight", "mlp.down_proj.weight", "self_attn.out_proj.weight", "fc2.weight")


def _random_weights(d: AsrDimensions, model_type: str, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in _weight_shapes(d, model_type):
        if "embed_tokens" in name:
            value = torch.randn(shape, generator=generator)
        elif len(shape) > 1:  # linear and convolution weights
            value = torch.randn(shape, generator=generator) / math.sqrt(math.prod(shape[1:]))
            if name.endswith(RESIDUAL_OUTPUTS):
                value *= RESIDUAL_OUTPUT_GAIN
        elif name.endswith(".weight"):  # a norm's (the one kind of weight with one dimension)
            value = 0.8 + 0.4 * torch.rand(shape, generator=generator)
        else:  # biases, LayerNorm biases
            value = 0.02 * torch.randn(shape, generator=generator)
        weights[name] = value.contiguous()
    return weights


def make_asr_test_model(directory: str | Path, size: str = "tiny", model_type: str = "asr", seed: int = 0) -> Path:
    files = asr_config_files(size, model_type)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = _random_weights(DIMENSIONS[model_type, size], model_type, seed)
    if size not in TEST_SIZES:  # stored in bfloat16, as the published checkpoints are
        weights = {name: value.to(torch.bfloat16) for name, value in weights.items()}
    save_file(weights, str(directory / "model.safetensors"), metadata={"format": "pt"})
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    vocab, merges = vocabulary_files()
    shutil.copyfile(vocab, directory / "vocab.json")
    shutil.copyfile(merges, directory / "merges.txt")
    return directory
