"""`--dtype` and `--quantize` of the commands that load a model (`synth`, `bench`, `transcribe`), resolved as
`serve` resolves DTYPE and QUANTIZE: each flag, else its environment variable, else auto."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Settings
    from .config.models import Precision


def add_dtype_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="the weights' dtype, as DTYPE for serve (default: DTYPE, else auto)",
    )


def flag_settings(args: argparse.Namespace) -> Settings:
    """The settings `--dtype` and `--quantize` resolve through, as `serve` resolves DTYPE and QUANTIZE: each flag,
    else its variable, else auto."""
    from .config import Settings

    return Settings.load(dtype=args.dtype, quantize=args.quantize)


def flag_precision(settings: Settings, device: str) -> Precision:
    """A speech model's or a transcriber's dtype and quantisation on `device` (`--device`) from `flag_settings`, as
    `serve` gives them (on a CPU by default w8a8, bfloat16 activations where the CPU multiplies bfloat16)."""
    from .model.device import cpu_multiplies_bfloat16

    kind = device.split(":")[0]
    return settings.precision(kind, kind == "cpu" and cpu_multiplies_bfloat16())
