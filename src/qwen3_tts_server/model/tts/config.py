"""Typed views of the official checkpoint configuration files (config.json, speech_tokenizer/config.json,
generation_config.json). Every id comes from these files; nothing model-specific is hard-coded here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import CheckpointError, UnsupportedModelError
from ..decoder_config import DecoderStackConfig, require_field

SUPPORTED_TOKENIZER_TYPE = "qwen3_tts_tokenizer_12hz"
MODEL_TYPES = ("custom_voice", "base", "voice_design")


@dataclass(frozen=True)
class CodePredictorConfig:
    stack: DecoderStackConfig
    vocab_size: int
    num_code_groups: int


@dataclass(frozen=True)
class TalkerConfig:
    stack: DecoderStackConfig
    vocab_size: int
    num_code_groups: int
    text_vocab_size: int
    text_hidden_size: int
    mrope_section: tuple[int, ...]
    codec_pad_id: int
    codec_bos_id: int
    codec_eos_id: int
    codec_think_id: int
    codec_nothink_id: int
    codec_think_bos_id: int
    codec_think_eos_id: int
    spk_id: dict[str, int]
    spk_is_dialect: dict[str, str | bool]
    codec_language_id: dict[str, int]
    code_predictor: CodePredictorConfig

    @classmethod
    def parse(cls, section: dict[str, Any]) -> TalkerConfig:
        where = "config.json talker_config"
        stack = DecoderStackConfig.parse(section, where, default_eps=1e-6)
        rope_scaling = section.get("rope_scaling") or {}
        mrope = tuple(int(x) for x in rope_scaling.get("mrope_section", ()))
        if mrope and sum(mrope) != stack.head_dim // 2:
            raise CheckpointError(f"{where}: mrope_section {list(mrope)} must sum to head_dim/2")
        cp_section = require_field(section, "code_predictor_config", where)
        cp_where = "config.json talker_config.code_predictor_config"
        code_predictor = CodePredictorConfig(
            stack=DecoderStackConfig.parse(cp_section, cp_where, default_eps=1e-6),
            vocab_size=int(require_field(cp_section, "vocab_size", cp_where)),
            num_code_groups=int(require_field(cp_section, "num_code_groups", cp_where)),
        )
        spk_id = {k.lower(): int(v) for k, v in (section.get("spk_id") or {}).items()}
        dialects = {k.lower(): v for k, v in (section.get("spk_is_dialect") or {}).items()}
        languages = {k.lower(): int(v) for k, v in (require_field(section, "codec_language_id", where)).items()}
        for speaker, dialect in dialects.items():
            if dialect and dialect not in languages:
                raise CheckpointError(f"{where}: dialect {dialect!r} of speaker {speaker!r} has no language id")
        return cls(
            stack=stack,
            vocab_size=int(require_field(section, "vocab_size", where)),
            num_code_groups=int(require_field(section, "num_code_groups", where)),
            text_vocab_size=int(require_field(section, "text_vocab_size", where)),
            text_hidden_size=int(require_field(section, "text_hidden_size", where)),
            mrope_section=mrope,
            codec_pad_id=int(require_field(section, "codec_pad_id", where)),
            codec_bos_id=int(require_field(section, "codec_bos_id", where)),
            codec_eos_id=int(require_field(section, "codec_eos_token_id", where)),
            codec_think_id=int(require_field(section, "codec_think_id", where)),
            codec_nothink_id=int(require_field(section, "codec_nothink_id", where)),
            codec_think_bos_id=int(require_field(section, "codec_think_bos_id", where)),
            codec_think_eos_id=int(require_field(section, "codec_think_eos_id", where)),
            spk_id=spk_id,
            spk_is_dialect=dialects,
            codec_language_id=languages,
            code_predictor=code_predictor,
        )


@dataclass(frozen=True)
class TTSConfig:
    """config.json of a Qwen3-TTS checkpoint."""

    model_type: str
    model_size: str
    im_start_token_id: int
    im_end_token_id: int
    tts_pad_token_id: int
    tts_bos_token_id: int
    tts_eos_token_id: int
    talker: TalkerConfig
    speaker_encoder: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> TTSConfig:
        tokenizer_type = raw.get("tokenizer_type")
        if tokenizer_type != SUPPORTED_TOKENIZER_TYPE:
            raise UnsupportedModelError(
                f"tokenizer_type {tokenizer_type!r} is not supported: only the 12 Hz family "
                f"({SUPPORTED_TOKENIZER_TYPE}) can be served (the 25 Hz models are not)"
            )
        model_type = raw.get("tts_model_type")
        if model_type not in MODEL_TYPES:
            raise UnsupportedModelError(
                f"tts_model_type {model_type!r} is not supported; expected one of {', '.join(MODEL_TYPES)}"
            )
        where = "config.json"
        return cls(
            model_type=model_type,
            model_size=str(raw.get("tts_model_size") or ""),
            im_start_token_id=int(require_field(raw, "im_start_token_id", where)),
            im_end_token_id=int(require_field(raw, "im_end_token_id", where)),
            tts_pad_token_id=int(require_field(raw, "tts_pad_token_id", where)),
            tts_bos_token_id=int(require_field(raw, "tts_bos_token_id", where)),
            tts_eos_token_id=int(require_field(raw, "tts_eos_token_id", where)),
            talker=TalkerConfig.parse(require_field(raw, "talker_config", where)),
            speaker_encoder=dict(raw.get("speaker_encoder_config") or {}),
        )

    @property
    def speakers(self) -> list[str]:
        """The preset speakers (CustomVoice models), lower-case."""
        return list(self.talker.spk_id)

    @property
    def languages(self) -> list[str]:
        return ["auto"] + [name for name in self.talker.codec_language_id if "dialect" not in name]

    @property
    def accepts_instruct(self) -> bool:
        """VoiceDesign needs an instruction; CustomVoice takes one except the 0.6B size; Base takes none."""
        if self.model_type == "voice_design":
            return True
        return self.model_type == "custom_voice" and self.model_size != "0b6"


@dataclass(frozen=True)
class CodecDecoderConfig:
    """speech_tokenizer/config.json, decoder part."""

    stack: DecoderStackConfig
    codebook_size: int
    codebook_dim: int
    latent_dim: int
    num_quantizers: int
    sliding_window: int
    layer_scale_initial_scale: float
    upsample_rates: tuple[int, ...]
    upsampling_ratios: tuple[int, ...]
    decoder_dim: int
    output_sample_rate: int
    samples_per_frame: int

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> CodecDecoderConfig:
        if raw.get("model_type") not in (None, SUPPORTED_TOKENIZER_TYPE):
            raise UnsupportedModelError(
                f"speech tokenizer {raw.get('model_type')!r} is not supported; expected {SUPPORTED_TOKENIZER_TYPE}"
            )
        where = "speech_tokenizer decoder_config"
        section = require_field(raw, "decoder_config", "speech_tokenizer/config.json")
        upsample_rates = tuple(int(x) for x in section.get("upsample_rates", (8, 5, 4, 3)))
        upsampling_ratios = tuple(int(x) for x in section.get("upsampling_ratios", (2, 2)))
        samples_per_frame = 1
        for factor in upsample_rates + upsampling_ratios:
            samples_per_frame *= factor
        declared = int(raw.get("decode_upsample_rate", samples_per_frame))
        if declared != samples_per_frame:
            raise CheckpointError(
                f"speech_tokenizer/config.json: decode_upsample_rate {declared} does not match the decoder's "
                f"upsampling product {samples_per_frame}"
            )
        return cls(
            stack=DecoderStackConfig.parse(section, where, default_eps=1e-5),
            codebook_size=int(section.get("codebook_size", 2048)),
            codebook_dim=int(require_field(section, "codebook_dim", where)),
            latent_dim=int(section.get("latent_dim", 1024)),
            num_quantizers=int(section.get("num_quantizers", 16)),
            sliding_window=int(section.get("sliding_window", 72)),
            layer_scale_initial_scale=float(section.get("layer_scale_initial_scale", 0.01)),
            upsample_rates=upsample_rates,
            upsampling_ratios=upsampling_ratios,
            decoder_dim=int(section.get("decoder_dim", 1536)),
            output_sample_rate=int(raw.get("output_sample_rate", 24000)),
            samples_per_frame=samples_per_frame,
        )


@dataclass(frozen=True)
class GenerationDefaults:
    """generation_config.json, with the official wrapper's fallbacks for absent keys."""

    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    subtalker_temperature: float = 0.9
    max_new_tokens: int = 2048

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> GenerationDefaults:
        known = {name: raw[name] for name in cls.__dataclass_fields__ if name in raw}
        return cls(**known)


# The codec encoder (voice cloning): speech_tokenizer/config.json `encoder_config`, a transformers MimiConfig.
# Activation names the encoder implements (model/tts/codec_encoder.py maps each to its function).
ENCODER_ACTIVATIONS = ("gelu", "gelu_pytorch_tanh", "relu", "silu", "swish")
_ENCODER_PAD_MODES = ("constant", "replicate", "reflect")
_ENCODER_WHERE = "speech_tokenizer encoder_config"

# MimiConfig's defaults (transformers configuration_mimi.py). None means "derived from other fields".
MIMI_DEFAULTS: dict[str, Any] = {
    "sampling_rate": 24000,
    "frame_rate": None,
    "audio_channels": 1,
    "hidden_size": 512,
    "num_filters": 64,
    "num_residual_layers": 1,
    "upsampling_ratios": None,
    "kernel_size": 7,
    "last_kernel_size": 3,
    "residual_kernel_size": 3,
    "dilation_growth_rate": 2,
    "use_causal_conv": True,
    "pad_mode": "constant",
    "compress": 2,
    "codebook_size": 2048,
    "codebook_dim": 256,
    "num_quantizers": 32,
    "use_conv_shortcut": False,
    "vector_quantization_hidden_dimension": 256,
    "num_semantic_quantizers": 1,
    "num_hidden_layers": 8,
    "intermediate_size": 2048,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": None,
    "hidden_act": "gelu",
    "norm_eps": 1e-5,
    "use_streaming": False,
    "rope_theta": 10000.0,
    "sliding_window": 250,
    "attention_bias": False,
}


def _encoder_field(section: dict[str, Any], key: str, kind: type, where: str = _ENCODER_WHERE) -> Any:
    value = section.get(key, MIMI_DEFAULTS.get(key))
    try:
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind is int and (isinstance(value, bool) or float(value) != int(value)):
            raise TypeError
        return kind(value)
    except (TypeError, ValueError):
        raise CheckpointError(f"{where}: field {key!r} has an invalid value {value!r}") from None


@dataclass(frozen=True)
class CodecEncoderConfig:
    """speech_tokenizer/config.json, encoder part (a transformers MimiConfig plus the 12 Hz wrapper's fields)."""

    sampling_rate: int
    hidden_size: int
    num_filters: int
    num_residual_layers: int
    upsampling_ratios: tuple[int, ...]
    kernel_size: int
    last_kernel_size: int
    residual_kernel_size: int
    dilation_growth_rate: int
    use_causal_conv: bool
    pad_mode: str
    compress: int
    use_conv_shortcut: bool
    codebook_size: int
    codebook_dim: int
    num_quantizers: int
    num_semantic_quantizers: int
    vector_quantization_hidden_dimension: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_act: str
    norm_eps: float
    rope_theta: float
    sliding_window: int | None  # parsed for completeness; transformers' eager/SDPA Mimi attention ignores it
    attention_bias: bool
    frame_rate: float
    valid_num_quantizers: int
    encode_downsample_rate: int
    input_sample_rate: int

    @property
    def hop_length(self) -> int:
        """Samples per frame of the SEANet convolutions (before the stride-2 downsampling)."""
        return math.prod(self.upsampling_ratios)

    @property
    def encodec_frame_rate(self) -> int:
        return math.ceil(self.sampling_rate / self.hop_length)

    @property
    def downsample_kernel(self) -> int:
        return 2 * int(self.encodec_frame_rate / self.frame_rate)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> CodecEncoderConfig:
        """Read the whole speech_tokenizer/config.json dict. Only `encoder_config` is required; absent fields
        take MimiConfig's defaults, absent top-level fields those of the official tokenizer config."""
        if "encoder_config" not in raw:
            raise CheckpointError("speech_tokenizer/config.json is missing the required field 'encoder_config'")
        section = raw["encoder_config"]
        if not isinstance(section, dict):
            raise CheckpointError("speech_tokenizer/config.json: 'encoder_config' must be an object")
        _reject_unsupported_encoder(section)

        hidden = _encoder_field(section, "hidden_size", int)
        heads = _encoder_field(section, "num_attention_heads", int)
        ratios = section.get("upsampling_ratios") or [8, 6, 5, 4]
        try:
            upsampling_ratios = tuple(int(r) for r in ratios)
        except (TypeError, ValueError):
            raise CheckpointError(
                f"{_ENCODER_WHERE}: field 'upsampling_ratios' has an invalid value {ratios!r}"
            ) from None
        codebook_dim = section.get("codebook_dim", MIMI_DEFAULTS["codebook_dim"])
        head_dim = section.get("head_dim")
        sliding_window = section.get("sliding_window", MIMI_DEFAULTS["sliding_window"])
        cfg = cls(
            sampling_rate=_encoder_field(section, "sampling_rate", int),
            hidden_size=hidden,
            num_filters=_encoder_field(section, "num_filters", int),
            num_residual_layers=_encoder_field(section, "num_residual_layers", int),
            upsampling_ratios=upsampling_ratios,
            kernel_size=_encoder_field(section, "kernel_size", int),
            last_kernel_size=_encoder_field(section, "last_kernel_size", int),
            residual_kernel_size=_encoder_field(section, "residual_kernel_size", int),
            dilation_growth_rate=_encoder_field(section, "dilation_growth_rate", int),
            use_causal_conv=_encoder_field(section, "use_causal_conv", bool),
            pad_mode=str(section.get("pad_mode", "constant")),
            compress=_encoder_field(section, "compress", int),
            use_conv_shortcut=_encoder_field(section, "use_conv_shortcut", bool),
            codebook_size=_encoder_field(section, "codebook_size", int),
            codebook_dim=hidden if codebook_dim is None else _encoder_field(section, "codebook_dim", int),
            num_quantizers=_encoder_field(section, "num_quantizers", int),
            num_semantic_quantizers=_encoder_field(section, "num_semantic_quantizers", int),
            vector_quantization_hidden_dimension=_encoder_field(section, "vector_quantization_hidden_dimension", int),
            num_hidden_layers=_encoder_field(section, "num_hidden_layers", int),
            intermediate_size=_encoder_field(section, "intermediate_size", int),
            num_attention_heads=heads,
            num_key_value_heads=_encoder_field(section, "num_key_value_heads", int),
            head_dim=_encoder_field(section, "head_dim", int) if head_dim else hidden // heads,
            hidden_act=str(section.get("hidden_act", "gelu")),
            norm_eps=_encoder_field(section, "norm_eps", float),
            rope_theta=_encoder_field(section, "rope_theta", float),
            sliding_window=None if sliding_window is None else _encoder_field(section, "sliding_window", int),
            attention_bias=_encoder_field(section, "attention_bias", bool),
            frame_rate=_encoder_frame_rate(section, upsampling_ratios),
            valid_num_quantizers=_encoder_top_level(raw, "encoder_valid_num_quantizers"),
            encode_downsample_rate=_encoder_top_level(raw, "encode_downsample_rate"),
            input_sample_rate=_encoder_top_level(raw, "input_sample_rate"),
        )
        cfg._validate()
        return cfg

    def _validate(self) -> None:
        if self.pad_mode not in _ENCODER_PAD_MODES:
            raise UnsupportedModelError(f"{_ENCODER_WHERE}: pad_mode {self.pad_mode!r} is not supported")
        if self.hidden_act not in ENCODER_ACTIVATIONS:
            raise UnsupportedModelError(f"{_ENCODER_WHERE}: hidden_act {self.hidden_act!r} is not supported")
        if self.frame_rate == self.encodec_frame_rate or self.downsample_kernel < 2:
            # transformers builds no downsampling conv for an equal rate, and its encode then fails.
            raise UnsupportedModelError(
                f"{_ENCODER_WHERE}: frame_rate {self.frame_rate} with convolutions at {self.encodec_frame_rate} Hz "
                "is not supported"
            )
        if self.codebook_size <= 0 or self.codebook_size & (self.codebook_size - 1):
            raise CheckpointError(f"{_ENCODER_WHERE}: codebook_size {self.codebook_size} must be a power of 2")
        if not 0 < self.num_semantic_quantizers < self.num_quantizers:
            raise CheckpointError(f"{_ENCODER_WHERE}: num_semantic_quantizers must be in [1, num_quantizers)")
        if self.codebook_dim != self.vector_quantization_hidden_dimension:
            raise CheckpointError(f"{_ENCODER_WHERE}: codebook_dim must equal vector_quantization_hidden_dimension")
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise CheckpointError(f"{_ENCODER_WHERE}: attention heads do not divide hidden_size / each other")
        if self.head_dim % 2:
            raise CheckpointError(f"{_ENCODER_WHERE}: head_dim must be even for rotary embeddings")
        if not 0 < self.valid_num_quantizers <= self.num_quantizers:
            raise CheckpointError(
                f"speech_tokenizer/config.json: encoder_valid_num_quantizers {self.valid_num_quantizers} "
                f"must be in [1, {self.num_quantizers}]"
            )
        if self.encode_downsample_rate != 2 * self.hop_length:
            raise CheckpointError(
                f"speech_tokenizer/config.json: encode_downsample_rate {self.encode_downsample_rate} does not "
                f"match the encoder's {2 * self.hop_length} samples per frame"
            )


# Defaults of the official Qwen3TTSTokenizerV2Config for the top-level fields the encoder reads.
_ENCODER_TOP_LEVEL_DEFAULTS = {
    "encoder_valid_num_quantizers": 16,
    "encode_downsample_rate": 1920,
    "input_sample_rate": 24000,
}


def _encoder_top_level(raw: dict[str, Any], key: str) -> int:
    return _encoder_field(
        {key: raw.get(key, _ENCODER_TOP_LEVEL_DEFAULTS[key])}, key, int, "speech_tokenizer/config.json"
    )


def _reject_unsupported_encoder(section: dict[str, Any]) -> None:
    def unsupported(what: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"{_ENCODER_WHERE}: {what} is not supported")

    if section.get("audio_channels", 1) != 1:
        raise unsupported(f"audio_channels {section['audio_channels']!r}")
    if section.get("use_streaming", False):
        raise unsupported("use_streaming")
    if isinstance(section.get("residual_kernel_size"), (list, tuple)):
        raise unsupported("a list of residual_kernel_size")
    rope_scaling = section.get("rope_scaling") or {}
    if rope_scaling.get("rope_type", rope_scaling.get("type", "default")) != "default":
        raise unsupported(f"rope_scaling {rope_scaling!r}")
    if section.get("partial_rotary_factor", 1.0) != 1.0:
        raise unsupported("partial_rotary_factor")


def _encoder_frame_rate(section: dict[str, Any], ratios: tuple[int, ...]) -> float:
    # MimiConfig keeps an explicit frame_rate in `_frame_rate`; a serialised config may carry that key,
    # which PretrainedConfig sets after __init__, so it wins over `frame_rate`.
    value = section["_frame_rate"] if "_frame_rate" in section else section.get("frame_rate")
    if value is None:
        sampling_rate = _encoder_field(section, "sampling_rate", int)
        return sampling_rate / (math.prod(ratios) * 2)
    return _encoder_field({"frame_rate": value}, "frame_rate", float)
