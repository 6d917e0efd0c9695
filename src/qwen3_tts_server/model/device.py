"""The device and dtype a model is loaded on and in, parsed from their names (settings, flags) with the errors
a user can act on."""

from __future__ import annotations

import torch

from ..errors import ConfigurationError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_device(name: str | torch.device) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigurationError(f"unknown device {name!r}: {exc}", param="device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigurationError("CUDA is not available here; use --device cpu", param="device")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigurationError(
            f"no CUDA device {device.index}; {torch.cuda.device_count()} available", param="device"
        )
    return device


def parse_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigurationError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}", param="dtype") from None


def cpu_multiplies_bfloat16() -> bool:
    """Whether this CPU has bfloat16 matrix instructions (AVX512-BF16 or AMX), where oneDNN's bfloat16 products run
    2 to 3 times faster than float32 ones; without them bfloat16 is emulated, slower than float32."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # private to torch.cpu: absent is False
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def cpu_has_vnni() -> bool:
    """Whether this CPU has AVX-512 VNNI, whose int8 dot products add into 32 bits (fbgemm's AVX2 path adds pairs in
    16 bits, which 8-bit activations can saturate)."""
    return bool(getattr(torch.cpu, "_is_vnni_supported", lambda: False)())
