"""Engine settings: how the decode loop runs (rows per step, the queue, time limits, a stream's buffer, the CPU
cores it may use, compiling and CUDA graphs), and the parsing of a list of CPU cores."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from .group import EMPTY_UNSETS, SettingsGroup

# Rows per decode step when MAX_BATCH_SIZE is unset (here, not in the engine: Ray's build process decides it for
# the replicas' device without torch).
GPU_BATCH_SIZE = 64
CPU_BATCH_SIZE = 16


class EngineSettings(SettingsGroup):
    """How the engine batches, queues, times and runs requests."""

    title = "Engine"

    max_batch_size: Annotated[int | None, EMPTY_UNSETS] = Field(
        None, ge=1, description="rows per decode step (default 16 on CPU, 64 on GPU)"
    )
    max_queue_depth: int = Field(
        64, ge=0, description="requests waiting for a row before new ones get 503; 0 no limit (as the earlier server)"
    )
    request_timeout: float = Field(
        300.0,
        ge=0,
        description="seconds a request may take, time paused for a slow client not counted; also how long a client "
        "may take no audio before it is dropped; 0 no limit",
    )
    scheduler: Literal["deadline", "fixed"] = Field(
        "deadline",
        description="how the speech engine admits and steps requests: deadline prefills the waiting requests together "
        "and lets streams whose listeners hold plenty of audio skip steps while others are about to run dry; fixed "
        "prefills one after another, every stream stepping every step (the policy before, to measure against)",
    )
    max_prefills_per_step: int = Field(
        32,
        ge=1,
        description="waiting speech requests admitted into free rows per engine step at most (the deadline "
        "scheduler admits fewer when streams would run dry meanwhile); the fixed scheduler used 2",
    )
    stream_buffer_seconds: float = Field(
        30.0,
        ge=0,
        description="audio a stream may hold ahead of what its client has taken; past it the stream's engine row "
        "pauses until the client catches up; 0 no bound",
    )
    inference_cpu_cores: Annotated[str | None, EMPTY_UNSETS] = Field(
        None, description="CPU cores for the engine thread, e.g. 0-3 or 0,2 (default: all); its torch threads follow"
    )
    torch_compile: Annotated[bool | None, EMPTY_UNSETS] = Field(
        None,
        description="compile the frame step's layers (torch.compile) at warm-up: on, off, or auto (off: 0 to 4 "
        "percent faster on a CPU for seconds of compiling; on CUDA the step replays as CUDA graphs)",
    )
    fused_kernels: Literal["auto", "off"] = Field(
        "auto",
        description="run the code predictor's 15 passes a frame through fused Triton kernels: auto where they can "
        "run (CUDA with Triton; checked against the layer-by-layer passes on first use, which they fall back to with "
        "one warning, as /health's fused_kernels says), off for the layer-by-layer passes",
    )
    traced_predictor: Literal["auto", "off"] = Field(
        "auto",
        description="on a CPU, run the code predictor's 15 passes a frame as a TorchScript trace of its own code (no "
        "Python between its operations: the same operations and codes, checked against the layer-by-layer passes on "
        "each row count's first step, which they fall back to with one warning, as /health's traced_predictor says); "
        "off for the layer-by-layer passes; not with TORCH_COMPILE",
    )
    huge_pages: Literal["auto", "off"] = Field(
        "auto",
        description="after a model loads on a CPU, move its resident memory into the kernel's 2 MiB transparent huge "
        "pages (Linux 6.1 or later, transparent_hugepage madvise or always), on a thread of its own while the model "
        "serves: a decode step streams every weight, and with 4 KiB pages most reads miss the TLB; off: memory stays "
        "as allocated",
    )
    cuda_graphs: bool = Field(
        True,
        description="replay the frame step as CUDA graphs on a GPU (a capture that fails or replays other codes than "
        "the eager step falls back to it, as /health's cuda_graphs says)",
    )

    @field_validator("torch_compile", mode="before")
    @classmethod
    def _auto_compile(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() == "auto" else value

    @field_validator("inference_cpu_cores")
    @classmethod
    def _valid_cores(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cores(value)
        return value

    def cpu_cores(self) -> set[int] | None:
        """The cores INFERENCE_CPU_CORES names; None: every core the process may use."""
        return parse_cores(self.inference_cpu_cores) if self.inference_cpu_cores else None

    def resolved_compile(self) -> bool:
        """TORCH_COMPILE, or its default: off. On a CPU it measured 0-4% faster (0.6B, int8 and int4, 1 to 16
        streams) for 5 s more before ready; on CUDA the step replays as CUDA graphs instead."""
        return bool(self.torch_compile)


def parse_cores(spec: str) -> set[int]:
    """CPU numbers from a list like `0-3,6` (taskset's syntax)."""
    cores: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or (last and int(last) < int(first)):
            raise ValueError(f"{spec!r} is not a list of cores like 0-3,6")
        cores.update(range(int(first), int(last or first) + 1))
    return cores
