"""A Qwen3 decoder stack's configuration as a checkpoint's config.json section gives it: the stacks of both
families (TTS talker, code predictor and codec; ASR text decoder) parse theirs here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError, UnsupportedModelError


def require_field(section: dict[str, Any], key: str, where: str) -> Any:
    """`section[key]`, or a CheckpointError naming the field and `where` the section is."""
    if key not in section:
        raise CheckpointError(f"{where} is missing the required field {key!r}")
    return section[key]


@dataclass(frozen=True)
class DecoderStackConfig:
    """A pre-norm transformer stack (talker, code predictor, codec pre-transformer; the ASR text decoder)."""

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
        hidden = int(require_field(section, "hidden_size", where))
        heads = int(require_field(section, "num_attention_heads", where))
        if section.get("hidden_act", "silu") != "silu":
            raise UnsupportedModelError(f"{where}: hidden_act {section['hidden_act']!r} is not supported")
        if section.get("use_sliding_window", False):
            raise UnsupportedModelError(f"{where}: sliding-window attention is not supported")
        rope_scaling = section.get("rope_scaling") or {}
        if rope_scaling.get("rope_type", rope_scaling.get("type", "default")) != "default":
            raise UnsupportedModelError(f"{where}: rope type {rope_scaling.get('rope_type')!r} is not supported")
        return cls(
            hidden_size=hidden,
            intermediate_size=int(require_field(section, "intermediate_size", where)),
            num_hidden_layers=int(require_field(section, "num_hidden_layers", where)),
            num_attention_heads=heads,
            num_key_value_heads=int(section.get("num_key_value_heads") or heads),
            head_dim=int(section.get("head_dim") or hidden // heads),
            rms_norm_eps=float(section.get("rms_norm_eps", default_eps)),
            rope_theta=float(section.get("rope_theta", 10000.0)),
            attention_bias=bool(section.get("attention_bias", False)),
        )
