"""Random-weight Qwen3-TTS checkpoints in the official on-disk format (`make-test-model`).

Both this project's loader and the official `qwen-tts` package load them. `tiny` builds in seconds for
the tests; `small` is a 4-layer, 256-wide talker for CPU benchmarks; `0.6b` and `1.7b` have the real
dimensions. All use the real Qwen text vocabulary. The same seed gives the same bytes. The JSON files hold
every key of the published ones, so tools written for those (GGUF, ONNX converters) read these too.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..model.tts.codec import SpeechTokenizer
from ..model.tts.config import MIMI_DEFAULTS, CodecDecoderConfig, CodecEncoderConfig, TTSConfig
from ..model.tts.speaker_encoder import SpeakerEncoderConfig
from ..model.tts.talker import Talker
from .codec_encoder_weights import random_encoder_weights
from .qwen_vocabulary import TEXT_VOCAB_SIZE, added_token_id, tokenizer_config, vocabulary_files
from .speaker_encoder_weights import random_speaker_encoder_weights

SIZES = ("tiny", "small", "0.6b", "1.7b")
TYPES = ("custom_voice", "base", "voice_design")
FIRST_ADDED_ID = 151643
ASSISTANT_TOKEN_ID = 77091  # "assistant" in the Qwen vocabulary, as the published config.json has it
TRANSFORMERS_VERSION = "4.57.3"  # the version qwen-tts 0.1.1 pins; save_pretrained records it

# The keys transformers 4.57.3 serialises for a nested PretrainedConfig, with their defaults. The published
# code_predictor_config carries them all; loading them changes nothing (each is the value already in effect).
PRETRAINED_CONFIG_DEFAULTS: dict[str, Any] = {
    "_name_or_path": "",
    "add_cross_attention": False,
    "architectures": None,
    "bad_words_ids": None,
    "begin_suppress_tokens": None,
    "bos_token_id": None,
    "chunk_size_feed_forward": 0,
    "cross_attention_hidden_size": None,
    "decoder_start_token_id": None,
    "diversity_penalty": 0.0,
    "do_sample": False,
    "dtype": None,
    "early_stopping": False,
    "encoder_no_repeat_ngram_size": 0,
    "eos_token_id": None,
    "exponential_decay_length_penalty": None,
    "finetuning_task": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
    "is_decoder": False,
    "is_encoder_decoder": False,
    "label2id": {"LABEL_0": 0, "LABEL_1": 1},
    "length_penalty": 1.0,
    "max_length": 20,
    "min_length": 0,
    "no_repeat_ngram_size": 0,
    "num_beam_groups": 1,
    "num_beams": 1,
    "num_return_sequences": 1,
    "output_attentions": False,
    "output_hidden_states": False,
    "output_scores": False,
    "pad_token_id": None,
    "prefix": None,
    "problem_type": None,
    "pruned_heads": {},
    "remove_invalid_values": False,
    "repetition_penalty": 1.0,
    "return_dict": True,
    "return_dict_in_generate": False,
    "sep_token_id": None,
    "suppress_tokens": None,
    "task_specific_params": None,
    "temperature": 1.0,
    "tf_legacy_loss": False,
    "tie_encoder_decoder": False,
    "tokenizer_class": None,
    "top_k": 50,
    "top_p": 1.0,
    "torchscript": False,
    "typical_p": 1.0,
    "use_bfloat16": False,
}

# Codec control ids of the real checkpoints (pad, bos, eos, think, nothink as published; think_bos,
# think_eos and the language and speaker ids are placed in the same control range, unverified).
CODEC_IDS = {
    "codec_pad_id": 2148,
    "codec_bos_id": 2149,
    "codec_eos_token_id": 2150,
    "codec_think_id": 2154,
    "codec_nothink_id": 2155,
    "codec_think_bos_id": 2156,
    "codec_think_eos_id": 2157,
}
LANGUAGE_IDS = {
    "chinese": 2055,
    "english": 2050,
    "german": 2053,
    "italian": 2070,
    "portuguese": 2071,
    "spanish": 2054,
    "japanese": 2058,
    "korean": 2064,
    "french": 2061,
    "russian": 2069,
    "beijing_dialect": 2074,
    "sichuan_dialect": 2062,
}
SPEAKERS = {
    "serena": (3066, False),
    "vivian": (3065, False),
    "uncle_fu": (3010, False),
    "ryan": (3061, False),
    "aiden": (2861, False),
    "ono_anna": (2873, False),
    "sohee": (2864, False),
    "eric": (2875, "sichuan_dialect"),
    "dylan": (2878, "beijing_dialect"),
}


@dataclass(frozen=True)
class Dimensions:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    text_hidden: int
    mrope: tuple[int, int, int]
    cp_hidden: int
    cp_layers: int
    cp_heads: int
    cp_kv_heads: int
    cp_head_dim: int
    cp_ffn: int
    codec: dict[str, Any]
    size_tag: str


TINY_CODEC = {
    "latent_dim": 32,
    "codebook_dim": 32,
    "decoder_dim": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 8,
    "num_hidden_layers": 2,
}
REAL_CODEC = {
    "latent_dim": 1024,
    "codebook_dim": 512,
    "decoder_dim": 1536,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "head_dim": 64,
    "num_hidden_layers": 8,
}
DIMENSIONS = {
    # tts_model_size must not be "0b6" for the small ones: the official wrapper's substring test would
    # then refuse instructions.
    "tiny": Dimensions(64, 2, 4, 2, 16, 128, 32, (4, 2, 2), 32, 2, 4, 2, 8, 64, TINY_CODEC, "tiny"),
    "small": Dimensions(256, 4, 8, 4, 32, 768, 128, (8, 4, 4), 256, 4, 8, 4, 32, 768, TINY_CODEC, "small"),
    "0.6b": Dimensions(1024, 28, 16, 8, 128, 3072, 2048, (24, 20, 20), 1024, 5, 16, 8, 128, 3072, REAL_CODEC, "0b6"),
    "1.7b": Dimensions(2048, 28, 16, 8, 128, 6144, 2048, (24, 20, 20), 1024, 5, 16, 8, 128, 3072, REAL_CODEC, "1b7"),
}


def _talker_config(d: Dimensions, model_type: str) -> dict[str, Any]:
    speakers = SPEAKERS if model_type == "custom_voice" else {}
    return {
        "model_type": "qwen3_tts_talker",
        "vocab_size": 3072,
        "hidden_size": d.hidden,
        "intermediate_size": d.ffn,
        "num_hidden_layers": d.layers,
        "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": {"mrope_section": list(d.mrope), "interleaved": True, "rope_type": "default"},
        "attention_bias": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "position_id_per_seconds": 13,  # published; neither the official package nor ours reads it
        "num_code_groups": 16,
        "text_hidden_size": d.text_hidden,
        "text_vocab_size": TEXT_VOCAB_SIZE,
        **CODEC_IDS,
        "codec_language_id": LANGUAGE_IDS,
        "spk_id": {name: sid for name, (sid, _) in speakers.items()},
        "spk_is_dialect": {name: dialect for name, (_, dialect) in speakers.items()},
        "code_predictor_config": {
            **PRETRAINED_CONFIG_DEFAULTS,
            "model_type": "qwen3_tts_talker_code_predictor",
            "vocab_size": 2048,
            "hidden_size": d.cp_hidden,
            "intermediate_size": d.cp_ffn,
            "num_hidden_layers": d.cp_layers,
            "num_attention_heads": d.cp_heads,
            "num_key_value_heads": d.cp_kv_heads,
            "head_dim": d.cp_head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "attention_bias": False,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": 28,
            "layer_types": ["full_attention"] * d.cp_layers,
            "attention_dropout": 0.0,
            "initializer_range": 0.02,
            "use_cache": True,
            "tie_word_embeddings": False,
            "num_code_groups": 16,
        },
    }


def _speaker_encoder_config(d: Dimensions) -> dict[str, Any]:
    if d.size_tag in ("tiny", "small"):
        channels, attention = [32, 32, 32, 32, 96], 16
    else:  # the official defaults
        channels, attention = [512, 512, 512, 512, 1536], 128
    return {
        "mel_dim": 128,
        "enc_dim": d.hidden,
        "enc_channels": channels,
        "enc_kernel_sizes": [5, 3, 3, 3, 1],
        "enc_dilations": [1, 2, 3, 4, 1],
        "enc_attention_channels": attention,
        "enc_res2net_scale": 8,
        "enc_se_channels": attention,
        "sample_rate": 24000,
    }


def _config(d: Dimensions, model_type: str) -> dict[str, Any]:
    extra = {"speaker_encoder_config": _speaker_encoder_config(d)} if model_type == "base" else {}
    return {
        **extra,
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "transformers_version": TRANSFORMERS_VERSION,
        "tts_model_type": model_type,
        "tts_model_size": d.size_tag,
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "im_start_token_id": added_token_id("<|im_start|>", FIRST_ADDED_ID),
        "im_end_token_id": added_token_id("<|im_end|>", FIRST_ADDED_ID),
        "tts_pad_token_id": added_token_id("<tts_pad>", FIRST_ADDED_ID),
        "tts_bos_token_id": added_token_id("<tts_text_bos>", FIRST_ADDED_ID),
        "tts_eos_token_id": added_token_id("<tts_text_eod>", FIRST_ADDED_ID),
        "assistant_token_id": ASSISTANT_TOKEN_ID,
        "talker_config": _talker_config(d, model_type),
    }


def _speech_tokenizer_config(d: Dimensions) -> dict[str, Any]:
    decoder = {
        **d.codec,
        "model_type": "",
        "codebook_size": 2048,
        "num_quantizers": 16,
        # Published; neither loader reads them (the first codebook has 2048 entries all the same).
        "num_semantic_quantizers": 1,
        "semantic_codebook_size": 4096,
        "vector_quantization_hidden_dimension": d.codec["codebook_dim"],
        "sliding_window": 72,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 8000,
        "attention_bias": False,
        "hidden_act": "silu",
        "layer_scale_initial_scale": 0.01,
        "upsample_rates": [8, 5, 4, 3],
        "upsampling_ratios": [2, 2],
        "attention_dropout": 0.0,
    }
    encoder = REAL_MIMI if d.size_tag in ("0b6", "1b7") else TINY_MIMI
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "transformers_version": TRANSFORMERS_VERSION,
        "encoder_valid_num_quantizers": 16,
        "input_sample_rate": 24000,
        "output_sample_rate": 24000,
        "decode_upsample_rate": 1920,
        "encode_downsample_rate": 1920,
        "decoder_config": decoder,
        "encoder_config": encoder,
    }


# The encoder (audio -> codes, for voice cloning) is a Mimi model: the real one as published (MimiConfig's
# defaults, 12.5 Hz, 32 quantizers of which 16 are used), the tiny one the same layout made small.
REAL_MIMI = {
    "model_type": "mimi",
    **{key: value for key, value in MIMI_DEFAULTS.items() if value is not None},
    "frame_rate": 12.5,
    "_frame_rate": 12.5,  # where MimiConfig keeps frame_rate; the published file has this key
    "upsampling_ratios": [8, 6, 5, 4],
    "head_dim": 64,
    "upsample_groups": 512,  # decoder-side; the official class builds (then drops) that part
    # MimiConfig's defaults for what the encoder never reads (or reads at the value it would take anyway)
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "layer_scale_initial_scale": 0.01,
    "max_position_embeddings": 8000,
    "trim_right_ratio": 1.0,
    "use_cache": False,
}
TINY_MIMI = {
    **REAL_MIMI,
    "hidden_size": 64,
    "num_filters": 8,
    "codebook_dim": 64,
    "vector_quantization_hidden_dimension": 64,
    "num_hidden_layers": 1,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 16,
    "upsample_groups": 64,
}


PREPROCESSOR_CONFIG = {
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "sampling_rate": 24000,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "chunk_length_s": None,
    "overlap": None,
}
GENERATION_CONFIG = {
    "do_sample": True,
    "top_k": 50,
    "top_p": 1.0,
    "temperature": 0.9,
    "repetition_penalty": 1.05,
    "subtalker_dosample": True,
    "subtalker_top_k": 50,
    "subtalker_top_p": 1.0,
    "subtalker_temperature": 0.9,
    "max_new_tokens": 8192,
}


def _random_talker(config: TTSConfig) -> dict[str, torch.Tensor]:
    talker = Talker(config.talker)
    for name, param in talker.named_parameters():
        if "embedding" in name:
            param.data.normal_(0.0, 1.0)
        elif name.endswith("norm.weight"):
            param.data.uniform_(0.8, 1.2)
    # A louder EOS row makes some greedy runs stop by themselves, so the stop path gets exercised.
    talker.codec_head.weight.data[config.talker.codec_eos_id] *= 2.0
    return {f"talker.{k}": v.contiguous() for k, v in talker.state_dict().items()}


def _random_codec(cfg: CodecDecoderConfig) -> dict[str, torch.Tensor]:
    tokenizer = SpeechTokenizer(cfg)
    for name, param in tokenizer.named_parameters():
        if name.endswith("embedding_sum"):
            param.data.normal_(0.0, 1.0)
        elif name.endswith("cluster_usage"):
            param.data.uniform_(0.5, 2.0)
        elif name.endswith(("alpha", "beta")):
            param.data.uniform_(-0.3, 0.3)
    # Keep the noise well inside [-1, 1] (about -15 dBFS RMS) and free of a DC offset.
    tokenizer.decoder.decoder[-1].conv.weight.data *= 0.5
    tokenizer.decoder.decoder[-1].conv.bias.data.zero_()
    return {k: v.contiguous() for k, v in tokenizer.state_dict().items()}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def config_files(size: str, model_type: str) -> dict[str, dict[str, Any]]:
    """Every JSON file of a checkpoint, by its path inside the checkpoint directory."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    if model_type not in TYPES:
        raise ValueError(f"unknown type {model_type!r}; choose one of {', '.join(TYPES)}")
    dims = DIMENSIONS[size]
    return {
        "config.json": _config(dims, model_type),
        "generation_config.json": GENERATION_CONFIG,
        "speech_tokenizer/config.json": _speech_tokenizer_config(dims),
        "speech_tokenizer/preprocessor_config.json": PREPROCESSOR_CONFIG,
        "tokenizer_config.json": tokenizer_config(FIRST_ADDED_ID),
    }


def make_test_model(directory: str | Path, size: str = "tiny", model_type: str = "custom_voice", seed: int = 0) -> Path:
    files = config_files(size, model_type)
    directory = Path(directory)
    (directory / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    codec = files["speech_tokenizer/config.json"]
    tts_config = TTSConfig.parse(files["config.json"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        talker_weights = _random_talker(tts_config)
        codec_weights = _random_codec(CodecDecoderConfig.parse(codec))
    generator = torch.Generator().manual_seed(seed)
    codec_weights |= random_encoder_weights(CodecEncoderConfig.parse(codec), generator)
    if model_type == "base":
        speaker_config = SpeakerEncoderConfig.parse(tts_config.speaker_encoder)
        talker_weights |= random_speaker_encoder_weights(speaker_config, generator)
    if size in ("0.6b", "1.7b"):  # stored in bfloat16, as the published checkpoints are
        talker_weights = {k: v.to(torch.bfloat16) for k, v in talker_weights.items()}
    save_file(talker_weights, str(directory / "model.safetensors"))
    save_file(codec_weights, str(directory / "speech_tokenizer" / "model.safetensors"))
    for name, data in files.items():
        _write_json(directory / name, data)
    vocab, merges = vocabulary_files()
    shutil.copyfile(vocab, directory / "vocab.json")
    shutil.copyfile(merges, directory / "merges.txt")
    return directory
