"""Typed views of the official checkpoint configuration files (config.json, speech_tokenizer/config.json,
generation_config.json). Every id comes from these files; nothing model-specific is hard-coded here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CheckpointError, UnsupportedModelError

SUPPORTED_TOKENIZER_TYPE = "qwen3_tts_tokenizer_12hz"
MODEL_TYPES = ("custom_voice", "base", "voice_design")


def _require(section: dict[str, Any], key: str, where: str) -> Any:
    if key not in section:
        raise CheckpointError(f"{where} is missing the required field {key!r}")
    return section[key]


@dataclass(frozen=True)
class DecoderStackConfig:
    """A pre-norm transformer stack (talker, code predictor, codec pre-transformer)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool

    @classmethod
    def parse(cls, section: dict[str, Any], where: str, default_eps: float) -> DecoderStackConfig:
        hidden = int(_require(section, "hidden_size", where))
        heads = int(_require(section, "num_attention_heads", where))
        if section.get("hidden_act", "silu") != "silu":
            raise UnsupportedModelError(f"{where}: hidden_act {section['hidden_act']!r} is not supported")
        if section.get("use_sliding_window", False):
            raise UnsupportedModelError(f"{where}: sliding-window attention is not supported")
        rope_scaling = section.get("rope_scaling") or {}
        if rope_scaling.get("rope_type", rope_scaling.get("type", "default")) != "default":
            raise UnsupportedModelError(f"{where}: rope type {rope_scaling.get('rope_type')!r} is not supported")
        return cls(
            hidden_size=hidden,
            intermediate_size=int(_require(section, "intermediate_size", where)),
            num_hidden_layers=int(_require(section, "num_hidden_layers", where)),
            num_attention_heads=heads,
            num_key_value_heads=int(section.get("num_key_value_heads") or heads),
            head_dim=int(section.get("head_dim") or hidden // heads),
            rms_norm_eps=float(section.get("rms_norm_eps", default_eps)),
            rope_theta=float(section.get("rope_theta", 10000.0)),
            attention_bias=bool(section.get("attention_bias", False)),
        )


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
        cp_section = _require(section, "code_predictor_config", where)
        cp_where = "config.json talker_config.code_predictor_config"
        code_predictor = CodePredictorConfig(
            stack=DecoderStackConfig.parse(cp_section, cp_where, default_eps=1e-6),
            vocab_size=int(_require(cp_section, "vocab_size", cp_where)),
            num_code_groups=int(_require(cp_section, "num_code_groups", cp_where)),
        )
        spk_id = {k.lower(): int(v) for k, v in (section.get("spk_id") or {}).items()}
        dialects = {k.lower(): v for k, v in (section.get("spk_is_dialect") or {}).items()}
        languages = {k.lower(): int(v) for k, v in (_require(section, "codec_language_id", where)).items()}
        for speaker, dialect in dialects.items():
            if dialect and dialect not in languages:
                raise CheckpointError(f"{where}: dialect {dialect!r} of speaker {speaker!r} has no language id")
        return cls(
            stack=stack,
            vocab_size=int(_require(section, "vocab_size", where)),
            num_code_groups=int(_require(section, "num_code_groups", where)),
            text_vocab_size=int(_require(section, "text_vocab_size", where)),
            text_hidden_size=int(_require(section, "text_hidden_size", where)),
            mrope_section=mrope,
            codec_pad_id=int(_require(section, "codec_pad_id", where)),
            codec_bos_id=int(_require(section, "codec_bos_id", where)),
            codec_eos_id=int(_require(section, "codec_eos_token_id", where)),
            codec_think_id=int(_require(section, "codec_think_id", where)),
            codec_nothink_id=int(_require(section, "codec_nothink_id", where)),
            codec_think_bos_id=int(_require(section, "codec_think_bos_id", where)),
            codec_think_eos_id=int(_require(section, "codec_think_eos_id", where)),
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
            im_start_token_id=int(_require(raw, "im_start_token_id", where)),
            im_end_token_id=int(_require(raw, "im_end_token_id", where)),
            tts_pad_token_id=int(_require(raw, "tts_pad_token_id", where)),
            tts_bos_token_id=int(_require(raw, "tts_bos_token_id", where)),
            tts_eos_token_id=int(_require(raw, "tts_eos_token_id", where)),
            talker=TalkerConfig.parse(_require(raw, "talker_config", where)),
            speaker_encoder=dict(raw.get("speaker_encoder_config") or {}),
        )

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
        section = _require(raw, "decoder_config", "speech_tokenizer/config.json")
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
            codebook_dim=int(_require(section, "codebook_dim", where)),
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
