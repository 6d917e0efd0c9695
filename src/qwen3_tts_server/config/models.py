"""Model settings: which checkpoints the server hosts (MODEL_ID or MODELS), on what device, in what dtype and
quantisation, within what memory, loaded when and unloaded after how long; and the parsing of a model's id and a
memory size."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from .group import COMMA_SEPARATED, SettingsGroup

DEFAULT_MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"


class ModelSettings(SettingsGroup):
    """The checkpoints hosted, where and how they load, and when they are unloaded."""

    title = "Models"

    model_id: str = Field(DEFAULT_MODEL, description="checkpoint directory or hub id (the one-model form of MODELS)")
    models: Annotated[list[str], NoDecode, COMMA_SEPARATED] = Field(
        default_factory=list,
        description="checkpoints hosted at once, comma-separated (or --model repeated); the first is MODEL_ID",
    )
    model_memory_budget: str | None = Field(
        None,
        description="bytes every loaded model may take together (suffix K, M, G), or auto: the GPU's free memory "
        "or the available RAM at start, less a tenth; the least recently used idle model is unloaded for another",
    )
    device: str = Field("auto", description="torch device: auto (cuda when present, else cpu), cpu, cuda, cuda:1")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype: auto is bfloat16 on a GPU, float32 on a CPU"
    )
    quantize: Literal["auto", "none", "int8", "int4", "fp8", "w8a8"] = Field(
        "auto",
        description="quantisation of the decoder layers: weight-only int8 or int4; fp8 on CUDA only; w8a8 on a CPU "
        "(int8 weights and int8 activations, each row quantised as it comes, fbgemm's integer products); auto is "
        "none, except for a Qwen3-ASR transcriber on a CPU: w8a8, the fastest there with float32's tokens (and, "
        "with DTYPE auto, bfloat16 activations where the CPU has bfloat16 instructions)",
    )
    prefill_weights: Literal["auto", "kept", "converted"] = Field(
        "auto",
        description="recognisers quantised on a CPU: their int8 layers keep a dequantised copy of the weights for "
        "prompt prefills (kept: no conversion per prefill, 0.88 GB more for the 0.6B in bfloat16) or convert them "
        "on each call; auto keeps the copy where the CPU multiplies bfloat16 and it takes at most a quarter of the "
        "free memory",
    )
    preload_model: bool = Field(False, description="load every model at start instead of on its first request")
    preload_models: Annotated[list[str], NoDecode, COMMA_SEPARATED] = Field(
        default_factory=list, description="hosted models (ids) loaded at start, comma-separated"
    )
    idle_timeout: float = Field(
        120.0, ge=0, description="seconds without work before the model (gateway: the worker) is unloaded; 0 never"
    )

    @model_validator(mode="before")
    @classmethod
    def _repeated_model_flag(cls, values: Any) -> Any:
        """--model given more than once hosts each (MODELS); once, it is MODEL_ID."""
        if isinstance(values, dict) and isinstance(values.get("model_id"), list):
            given = [part.strip() for item in values["model_id"] for part in item.split(",") if part.strip()]
            values = {**values, "model_id": given[0] if given else DEFAULT_MODEL}
            if len(given) > 1:
                values["models"] = given
        return values

    @model_validator(mode="after")
    def _first_model_is_model_id(self) -> ModelSettings:
        if self.models:
            self.model_id = self.models[0]
        return self

    @field_validator("model_memory_budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if value in ("", None):
            return None
        text = str(value).strip().lower()
        if text != "auto":
            parse_bytes(text)
        return text

    def hosted_models(self) -> list[str]:
        """The checkpoints to host: MODELS, or MODEL_ID alone."""
        return self.models or [self.model_id]

    def memory_budget_bytes(self) -> int | None:
        """MODEL_MEMORY_BUDGET in bytes; None when unset or auto (measured at start)."""
        budget = self.model_memory_budget
        return None if budget in (None, "auto") else parse_bytes(budget)

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def resolved_dtype(self, device: str) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "float32" if device == "cpu" else "bfloat16"

    def resolved_quantization(self) -> str | None:
        """QUANTIZE for speech models and aligners: auto is none."""
        return None if self.quantize in ("auto", "none") else self.quantize

    def transcriber_precision(self, device: str, cpu_multiplies_bfloat16: bool) -> tuple[str, str | None]:
        """The dtype and quantisation of a Qwen3-ASR transcriber: as set, or by QUANTIZE auto on a CPU w8a8, its
        activations in bfloat16 where DTYPE is auto and the CPU multiplies bfloat16 (the fastest precision there
        that kept float32's tokens: docs/guides/cpu.md)."""
        if self.quantize != "auto" or device != "cpu":
            return self.resolved_dtype(device), self.resolved_quantization()
        dtype = "bfloat16" if self.dtype == "auto" and cpu_multiplies_bfloat16 else self.resolved_dtype(device)
        return dtype, "w8a8"


def model_id_of(source: str) -> str:
    """A hosted model's id: a local checkpoint's directory name, or the hub id as given."""
    path = Path(source).expanduser()
    return path.resolve().name if path.exists() else source


def parse_bytes(text: str) -> int:
    """A byte count: digits with an optional K, M, G or T suffix (powers of 1024; a trailing B or iB allowed)."""
    cleaned = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = 1
    if cleaned[-1:] in "kmgt" and cleaned[-1:]:
        scale = 1024 ** ("kmgt".index(cleaned[-1]) + 1)
        cleaned = cleaned[:-1]
    try:
        amount = float(cleaned)
    except ValueError:
        raise ValueError(f"{text!r} is not a size like 8G, 512M or a number of bytes") from None
    if amount <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return int(amount * scale)
