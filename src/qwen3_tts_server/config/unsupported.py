"""Variables the earlier server read that this one does not (yet), and the warning each gets when it is set."""

from __future__ import annotations

import os
from collections.abc import Mapping

UNSUPPORTED_VARIABLES = {
    "VAD_TRIM": "removed (the earlier server dropped it too): synthesized audio is not trimmed",
    "WARMUP_TEXTS": "not needed: the model is warmed up with a short synthesis when it loads",
    "TORCH_COMPILE_MODE": "TORCH_COMPILE compiles the frame step's layers in inductor's default mode; on a GPU the "
    "whole step replays as CUDA graphs of its own (CUDA_GRAPHS), which max-autotune and reduce-overhead would "
    "capture again",
}


def unsupported_variable_warnings(environ: Mapping[str, str] = os.environ) -> list[str]:
    """One line for each variable of UNSUPPORTED_VARIABLES set (not empty) in `environ`: `serve` logs them at
    start, `config` prints them (the gateway relays those)."""
    return [
        f"{name} is set but ignored: {advice}" for name, advice in UNSUPPORTED_VARIABLES.items() if environ.get(name)
    ]
