"""Random-weight Qwen3-TTS checkpoints in the official on-disk format (`make-test-model`).

Both this project's loader and the official `qwen-tts` package load them. `tiny` builds in seconds for
the tests; `small` is a 4-layer, 256-wide talker for CPU benchmarks; `0.6b` and `1.7b` have the real
dimensions. All use the real Qwen text vocabulary. The same seed gives the same bytes.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..model.codec import SpeechTokenizer
from ..model.config import MIMI_DEFAULTS, CodecDecoderConfig, CodecEncoderConfig, TTSConfig
from ..model.speaker_encoder import SpeakerEncoderConfig
from ..model.talker import Talker
from .codec_encoder_weights import random_encoder_weights
from .qwen_vocabulary import TEXT_VOCAB_SIZE, added_token_id, tokenizer_config, vocabulary_files
from .speaker_encoder_weights import random_speaker_encoder_weights

SIZES = ("tiny", "small", "0.6b", "1.7b")
TYPES = ("custom_voice", "base", "voice_design")
FIRST_ADDED_ID = 151643

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
        "attention_dropout": 0.0,
        "num_code_groups": 16,
        "text_hidden_size": d.text_hidden,
        "text_vocab_size": TEXT_VOCAB_SIZE,
        **CODEC_IDS,
        "codec_language_id": LANGUAGE_IDS,
        "spk_id": {name: sid for name, (sid, _) in speakers.items()},
        "spk_is_dialect": {name: dialect for name, (_, dialect) in speakers.items()},
        "code_predictor_config": {
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
            "attention_bias": False,
            "use_sliding_window": False,
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
        "tts_model_type": model_type,
        "tts_model_size": d.size_tag,
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "im_start_token_id": added_token_id("<|im_start|>", FIRST_ADDED_ID),
        "im_end_token_id": added_token_id("<|im_end|>", FIRST_ADDED_ID),
        "tts_pad_token_id": added_token_id("<tts_pad>", FIRST_ADDED_ID),
        "tts_bos_token_id": added_token_id("<tts_text_bos>", FIRST_ADDED_ID),
        "tts_eos_token_id": added_token_id("<tts_text_eod>", FIRST_ADDED_ID),
        "talker_config": _talker_config(d, model_type),
    }


def _speech_tokenizer_config(d: Dimensions) -> dict[str, Any]:
    decoder = {
        **d.codec,
        "codebook_size": 2048,
        "num_quantizers": 16,
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
    "upsampling_ratios": [8, 6, 5, 4],
    "head_dim": 64,
    "upsample_groups": 512,  # decoder-side; the official class builds (then drops) that part
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


def make_test_model(directory: str | Path, size: str = "tiny", model_type: str = "custom_voice", seed: int = 0) -> Path:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    if model_type not in TYPES:
        raise ValueError(f"unknown type {model_type!r}; choose one of {', '.join(TYPES)}")
    directory = Path(directory)
    (directory / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    dims = DIMENSIONS[size]
    config = _config(dims, model_type)
    codec = _speech_tokenizer_config(dims)
    tts_config = TTSConfig.parse(config)
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
    _write_json(directory / "config.json", config)
    _write_json(directory / "generation_config.json", GENERATION_CONFIG)
    _write_json(directory / "speech_tokenizer" / "config.json", codec)
    _write_json(directory / "speech_tokenizer" / "preprocessor_config.json", PREPROCESSOR_CONFIG)
    _write_json(directory / "tokenizer_config.json", tokenizer_config(FIRST_ADDED_ID))
    vocab, merges = vocabulary_files()
    shutil.copyfile(vocab, directory / "vocab.json")
    shutil.copyfile(merges, directory / "merges.txt")
    return directory
