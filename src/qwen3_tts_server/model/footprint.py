"""What a checkpoint's weights will take in memory, read from the safetensors headers without loading them, and
a digest of a file's whole content (what tells two checkpoints' identical speech tokenizers apart from merely
similar ones)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from functools import lru_cache
from pathlib import Path

import torch

from ..errors import CheckpointError

# Bytes per element of the safetensors dtypes; floating ones are cast to the load dtype, the others kept.
_STORED_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1}
_KEPT_BYTES = {"I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_HASH_BLOCK = 1 << 20
_hash_lock = threading.Lock()


def weight_bytes(path: Path, dtype: torch.dtype, prefixes: tuple[str, ...] = ("",)) -> int:
    """The bytes the tensors under `prefixes` of a safetensors file take once loaded in `dtype` (an upper bound:
    the loader keeps some tables in their stored dtype or in the file)."""
    size = torch.empty((), dtype=dtype).element_size()
    total = 0
    for name, tensor in _header(path).items():
        if name == "__metadata__" or not name.startswith(prefixes):
            continue
        elements = 1
        for extent in tensor["shape"]:
            elements *= extent
        stored = tensor["dtype"]
        total += elements * (size if stored in _STORED_BYTES else _KEPT_BYTES.get(stored, 8))
    return total


def _header(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            return json.loads(handle.read(length))
    except (OSError, struct.error, ValueError) as exc:
        raise CheckpointError(f"cannot read the safetensors header of {path}: {exc}") from exc


def file_digest(path: Path) -> str:
    """SHA-256 of the whole file, computed once per (path, size, modification time) in this process."""
    stat = path.stat()
    with _hash_lock:  # two loads of checkpoints sharing a file hash it once
        return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def free_memory_bytes(device: torch.device) -> int:
    """Memory free for models now: the GPU's free memory, or on a CPU the machine's available RAM."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
