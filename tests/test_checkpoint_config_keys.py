"""make-test-model writes every key of the official configuration files, so tools written for the published
checkpoints (GGUF, ONNX and other converters) read ours too."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parity_cases import CHECKPOINTS
from qwen3_tts_server.model.tts.config import (
    CodecDecoderConfig,
    CodecEncoderConfig,
    GenerationDefaults,
    TTSConfig,
)
from qwen3_tts_server.model.tts.speaker_encoder import SpeakerEncoderConfig
from qwen3_tts_server.testing.random_checkpoint import SIZES, TYPES, config_files

CASES = [(size, model_type) for size in SIZES for model_type in TYPES]

# Where each key set lives: (file, nested keys).
TOP = ("config.json",)
TALKER = ("config.json", "talker_config")
CODE_PREDICTOR = ("config.json", "talker_config", "code_predictor_config")
SPEAKER_ENCODER = ("config.json", "speaker_encoder_config")
CODEC = ("speech_tokenizer/config.json",)
CODEC_DECODER = ("speech_tokenizer/config.json", "decoder_config")
CODEC_ENCODER = ("speech_tokenizer/config.json", "encoder_config")
PREPROCESSOR = ("speech_tokenizer/preprocessor_config.json",)
GENERATION = ("generation_config.json",)

# Derived once (qwen-tts 0.1.1, transformers 4.57.3) from what `save_pretrained` of the official
# Qwen3TTSConfig and Qwen3TTSTokenizerV2Config (with EncodecFeatureExtractor for the preprocessor) writes for
# these checkpoints' values, less speaker_encoder_config's "model_type", which the official loader rejects;
# plus the keys the published files carry that no class writes (PUBLISHED_ONLY below), the encoder's
# `frame_rate` (a MimiConfig argument, serialised as `_frame_rate`) and the ten keys of the published
# generation_config.json, which the official wrapper reads with json.load.
GENERIC_NESTED = {  # PretrainedConfig's own keys, serialised in full for the nested code_predictor_config
    "_name_or_path", "add_cross_attention", "architectures", "bad_words_ids", "begin_suppress_tokens",
    "bos_token_id", "chunk_size_feed_forward", "cross_attention_hidden_size", "decoder_start_token_id",
    "diversity_penalty", "do_sample", "dtype", "early_stopping", "encoder_no_repeat_ngram_size", "eos_token_id",
    "exponential_decay_length_penalty", "finetuning_task", "forced_bos_token_id", "forced_eos_token_id", "id2label",
    "is_decoder", "is_encoder_decoder", "label2id", "length_penalty", "max_length", "min_length",
    "no_repeat_ngram_size", "num_beam_groups", "num_beams", "num_return_sequences", "output_attentions",
    "output_hidden_states", "output_scores", "pad_token_id", "prefix", "problem_type", "pruned_heads",
    "remove_invalid_values", "repetition_penalty", "return_dict", "return_dict_in_generate", "sep_token_id",
    "suppress_tokens", "task_specific_params", "temperature", "tf_legacy_loss", "tie_encoder_decoder",
    "tokenizer_class", "top_k", "top_p", "torchscript", "typical_p", "use_bfloat16",
}  # fmt: skip
OFFICIAL_KEYS = {
    TOP: {
        "architectures", "assistant_token_id", "im_end_token_id", "im_start_token_id", "model_type",
        "talker_config", "tokenizer_type", "transformers_version", "tts_bos_token_id", "tts_eos_token_id",
        "tts_model_size", "tts_model_type", "tts_pad_token_id",
    },
    TALKER: {
        "attention_bias", "attention_dropout", "code_predictor_config", "codec_bos_id", "codec_eos_token_id",
        "codec_language_id", "codec_nothink_id", "codec_pad_id", "codec_think_bos_id", "codec_think_eos_id",
        "codec_think_id", "head_dim", "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
        "max_position_embeddings", "model_type", "num_attention_heads", "num_code_groups", "num_hidden_layers",
        "num_key_value_heads", "position_id_per_seconds", "rms_norm_eps", "rope_scaling", "rope_theta",
        "sliding_window", "spk_id", "spk_is_dialect", "text_hidden_size", "text_vocab_size", "use_cache",
        "use_sliding_window", "vocab_size",
    },
    CODE_PREDICTOR: GENERIC_NESTED | {
        "attention_bias", "attention_dropout", "head_dim", "hidden_act", "hidden_size", "initializer_range",
        "intermediate_size", "layer_types", "max_position_embeddings", "max_window_layers", "model_type",
        "num_attention_heads", "num_code_groups", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps",
        "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings", "use_cache", "use_sliding_window",
        "vocab_size",
    },
    SPEAKER_ENCODER: {  # exactly Qwen3TTSSpeakerEncoderConfig's arguments: it accepts no other key
        "enc_attention_channels", "enc_channels", "enc_dilations", "enc_dim", "enc_kernel_sizes",
        "enc_res2net_scale", "enc_se_channels", "mel_dim", "sample_rate",
    },
    CODEC: {
        "architectures", "decode_upsample_rate", "decoder_config", "encode_downsample_rate", "encoder_config",
        "encoder_valid_num_quantizers", "input_sample_rate", "model_type", "output_sample_rate",
        "transformers_version",
    },
    CODEC_DECODER: {
        "attention_bias", "attention_dropout", "codebook_dim", "codebook_size", "decoder_dim", "head_dim",
        "hidden_act", "hidden_size", "intermediate_size", "latent_dim", "layer_scale_initial_scale",
        "max_position_embeddings", "model_type", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
        "num_quantizers", "num_semantic_quantizers", "rms_norm_eps", "rope_theta", "semantic_codebook_size",
        "sliding_window", "upsample_rates", "upsampling_ratios", "vector_quantization_hidden_dimension",
    },
    CODEC_ENCODER: {
        "_frame_rate", "attention_bias", "attention_dropout", "audio_channels", "codebook_dim", "codebook_size",
        "compress", "dilation_growth_rate", "frame_rate", "head_dim", "hidden_act", "hidden_size",
        "initializer_range", "intermediate_size", "kernel_size", "last_kernel_size", "layer_scale_initial_scale",
        "max_position_embeddings", "model_type", "norm_eps", "num_attention_heads", "num_filters",
        "num_hidden_layers", "num_key_value_heads", "num_quantizers", "num_residual_layers",
        "num_semantic_quantizers", "pad_mode", "residual_kernel_size", "rope_theta", "sampling_rate",
        "sliding_window", "trim_right_ratio", "upsample_groups", "upsampling_ratios", "use_cache",
        "use_causal_conv", "use_conv_shortcut", "use_streaming", "vector_quantization_hidden_dimension",
    },
    PREPROCESSOR: {
        "chunk_length_s", "feature_extractor_type", "feature_size", "overlap", "padding_side", "padding_value",
        "return_attention_mask", "sampling_rate",
    },
    GENERATION: {
        "do_sample", "max_new_tokens", "repetition_penalty", "subtalker_dosample", "subtalker_temperature",
        "subtalker_top_k", "subtalker_top_p", "temperature", "top_k", "top_p",
    },
}  # fmt: skip

# Values of keys our loader does not need, as the published 0.6B/1.7B files have them (the 12 Hz tokenizer's
# config is the same in every checkpoint). No official class writes the first five.
PUBLISHED_VALUES: dict[tuple[str, ...], Any] = {
    (*TOP, "assistant_token_id"): 77091,
    (*TALKER, "position_id_per_seconds"): 13,
    (*CODEC_DECODER, "num_semantic_quantizers"): 1,
    (*CODEC_DECODER, "semantic_codebook_size"): 4096,
    (*CODEC_DECODER, "layer_scale_initial_scale"): 0.01,
    (*CODEC_ENCODER, "num_semantic_quantizers"): 1,
    (*CODEC_ENCODER, "layer_scale_initial_scale"): 0.01,
    (*CODEC_ENCODER, "max_position_embeddings"): 8000,
    (*CODEC_ENCODER, "_frame_rate"): 12.5,
    (*CODEC_ENCODER, "trim_right_ratio"): 1.0,
    (*CODEC_ENCODER, "use_cache"): False,
    (*CODEC_ENCODER, "initializer_range"): 0.02,
    (*TALKER, "initializer_range"): 0.02,
    (*TALKER, "sliding_window"): None,
    (*TALKER, "use_cache"): True,
    (*CODE_PREDICTOR, "max_length"): 20,
    (*CODE_PREDICTOR, "max_window_layers"): 28,
    (*CODE_PREDICTOR, "rope_scaling"): None,
    (*CODE_PREDICTOR, "sliding_window"): None,
    (*CODE_PREDICTOR, "use_cache"): True,
    (*CODE_PREDICTOR, "tie_word_embeddings"): False,
    (*TOP, "transformers_version"): "4.57.3",
    (*CODEC, "transformers_version"): "4.57.3",
}
# The published real-size quantizer widths: the decoder's equals its codebook_dim, the encoder's Mimi's 256.
REAL_QUANTIZER_WIDTHS = {CODEC_DECODER: 512, CODEC_ENCODER: 256}


def _at(files: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = files
    for key in path:
        value = value[key]
    return value


def _sections(model_type: str) -> dict[tuple[str, ...], set[str]]:
    if model_type != "base":
        return {path: keys for path, keys in OFFICIAL_KEYS.items() if path != SPEAKER_ENCODER}
    return {**OFFICIAL_KEYS, TOP: OFFICIAL_KEYS[TOP] | {"speaker_encoder_config"}}


@pytest.mark.parametrize(("size", "model_type"), CASES)
def test_every_official_key_is_written_and_no_other(size, model_type):
    files = config_files(size, model_type)
    for path, keys in _sections(model_type).items():
        written = set(_at(files, path))
        assert written == keys, f"{'/'.join(path)}: missing {sorted(keys - written)}, unknown {sorted(written - keys)}"


@pytest.mark.parametrize(("size", "model_type"), CASES)
def test_keys_our_loader_skips_have_the_published_values(size, model_type):
    files = config_files(size, model_type)
    for path, value in PUBLISHED_VALUES.items():
        assert _at(files, path) == value, "/".join(path)
    predictor = _at(files, CODE_PREDICTOR)
    assert {k: predictor[k] for k in ("do_sample", "top_k", "top_p", "temperature", "repetition_penalty")} == {
        "do_sample": False,
        "top_k": 50,
        "top_p": 1.0,
        "temperature": 1.0,
        "repetition_penalty": 1.0,
    }, "the predictor's generic generation keys must stay at transformers' defaults (the official ones)"


@pytest.mark.parametrize("size", SIZES)
def test_size_dependent_keys_follow_the_dimensions(size):
    files = config_files(size, "base")
    predictor = _at(files, CODE_PREDICTOR)
    assert predictor["layer_types"] == ["full_attention"] * predictor["num_hidden_layers"]
    for path in (CODEC_DECODER, CODEC_ENCODER):
        section = _at(files, path)
        assert section["vector_quantization_hidden_dimension"] == section["codebook_dim"], "/".join(path)
        if size in ("0.6b", "1.7b"):
            assert section["vector_quantization_hidden_dimension"] == REAL_QUANTIZER_WIDTHS[path], "/".join(path)
    encoder = _at(files, CODEC_ENCODER)
    assert encoder["_frame_rate"] == encoder["frame_rate"]
    assert _at(files, SPEAKER_ENCODER)["enc_dim"] == _at(files, TALKER)["hidden_size"]


@pytest.mark.parametrize(("size", "model_type"), CASES)
def test_our_loader_reads_every_size(size, model_type):
    files = config_files(size, model_type)
    config = TTSConfig.parse(files["config.json"])
    codec = files["speech_tokenizer/config.json"]
    assert CodecDecoderConfig.parse(codec).samples_per_frame == 1920
    assert CodecEncoderConfig.parse(codec).frame_rate == 12.5
    assert GenerationDefaults.parse(files["generation_config.json"]).max_new_tokens == 8192
    if model_type == "base":
        assert SpeakerEncoderConfig.parse(config.speaker_encoder).enc_dim == config.talker.stack.hidden_size


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_written_checkpoint_holds_these_files(checkpoint_dirs, name):
    spec = CHECKPOINTS[name]
    for relative, expected in config_files(spec["size"], spec["model_type"]).items():
        written = json.loads((checkpoint_dirs[name] / relative).read_text(encoding="utf-8"))
        assert written == json.loads(json.dumps(expected)), relative
