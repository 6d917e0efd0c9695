"""Model settings: which checkpoints the server hosts (MODEL_ID or MODELS), on what device, in what dtype and
quantisation, within what memory, loaded when and unloaded after how long; and the parsing of a model's id and a
memory size."""

from __future__ import annotations

from dataclasses import dataclass
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
        "auto",
        description="weights' dtype: auto is bfloat16 on a GPU, float32 on a CPU (with QUANTIZE auto, a speech model's "
        "or a transcriber's activations in bfloat16 where the CPU has bfloat16 instructions)",
    )
    quantize: Literal["auto", "none", "int8", "int4", "fp8", "w8a8"] = Field(
        "auto",
        description="quantisation of the decoder layers: weight-only int8 or int4; fp8 on CUDA only; w8a8 on a CPU "
        "(int8 weights and int8 activations, each row quantised as it comes, fbgemm's integer products); auto is "
        "none on a GPU and, on a CPU, w8a8 for speech models and Qwen3-ASR transcribers: the fastest there whose "
        "codes and tokens agree with float32's within a point of bfloat16's (with DTYPE auto, bfloat16 activations "
        "where the CPU has bfloat16 instructions); a ForcedAligner is not quantised",
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
        """QUANTIZE as set, auto meaning none (a ForcedAligner's; speech models and transcribers: `precision`)."""
        return None if self.quantize in ("auto", "none") else self.quantize

    def precision(self, device: str, cpu_multiplies_bfloat16: bool) -> Precision:
        """The dtype and quantisation of a speech model or a Qwen3-ASR transcriber, and why: as set, or with QUANTIZE
        auto on a CPU w8a8, its activations in bfloat16 where DTYPE is auto and the CPU multiplies bfloat16 (the
        fastest precision there whose codes and tokens agree with float32's within a point of bfloat16's:
        docs/guides/cpu.md)."""
        dtype = self.resolved_dtype(device)
        if self.quantize != "auto" or device != "cpu":
            given = f"DTYPE {self.dtype}" + (f" ({dtype})" if self.dtype == "auto" else "")
            given += f", QUANTIZE {self.quantize}" + (" (none off a CPU)" if self.quantize == "auto" else "")
            return Precision(dtype, self.resolved_quantization(), given)
        if self.dtype == "auto" and cpu_multiplies_bfloat16:
            return Precision("bfloat16", "w8a8", f"{AUTO_ON_CPU}, bfloat16 activations (this CPU multiplies bfloat16)")
        because = "DTYPE " + self.dtype if self.dtype != "auto" else "this CPU has no bfloat16 instructions"
        return Precision(dtype, "w8a8", f"{AUTO_ON_CPU}, {dtype} activations ({because})")


AUTO_ON_CPU = "QUANTIZE auto on a CPU: w8a8, the fastest precision within a point of bfloat16's agreement with float32"


@dataclass(frozen=True)
class Precision:
    """A model's dtype and quantisation (None: none), and why they were chosen (the startup log and /health)."""

    dtype: str
    quantize: str | None
    why: str


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
