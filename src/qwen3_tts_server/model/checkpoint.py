"""Finding a checkpoint (local directory or hub id) and loading safetensors straight onto a device."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from ..errors import CheckpointError
from .layers import Rotary

REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
)


def resolve_checkpoint(name_or_path: str | os.PathLike, required: Sequence[str] = REQUIRED_FILES) -> Path:
    """A local directory as it is, or a hub id downloaded (or found in the cache when HF_HUB_OFFLINE=1), holding
    the `required` files (a TTS checkpoint's by default)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        directory = path
    elif path.exists():
        raise CheckpointError(f"{path} is a file; a checkpoint is a directory")
    elif str(name_or_path).count("/") != 1 or str(name_or_path).startswith((".", "/", "~")):
        raise CheckpointError(f"checkpoint directory {name_or_path} does not exist (nor is it a hub id like Org/Name)")
    else:
        directory = _download(str(name_or_path))
    missing = [name for name in required if not (directory / name).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {directory} is missing {', '.join(missing)}")
    return directory


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    try:
        # MODEL_ID's current revision, as asked; only safetensors, JSON and text are read from it, no code is run.
        return Path(snapshot_download(repo_id, local_files_only=offline))  # nosec B615
    except LocalEntryNotFoundError as exc:
        raise CheckpointError(
            f"{repo_id} is not in the local hub cache and the hub cannot be reached"
            f"{' (HF_HUB_OFFLINE is set)' if offline else ''}; download it elsewhere and pass its "
            "directory with --model PATH, or build a test checkpoint with `qwen3-tts-server make-test-model`"
        ) from exc
    except Exception as exc:  # network, auth, unknown repo: one clear message instead of a traceback
        raise CheckpointError(f"could not fetch {repo_id} from the hub: {exc}") from exc


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint: `model.safetensors`, or the shards its index names."""
    index = directory / "model.safetensors.index.json"
    if not (directory / "model.safetensors").is_file() and index.is_file():
        try:
            shards = sorted(set(read_json(index)["weight_map"].values()))
        except (KeyError, AttributeError) as exc:
            raise CheckpointError(f"{index} has no weight_map") from exc
        missing = [name for name in shards if not (directory / name).is_file()]
        if missing:
            raise CheckpointError(f"checkpoint {directory} is missing {', '.join(missing)}")
        return [directory / name for name in shards]
    if not (directory / "model.safetensors").is_file():
        raise CheckpointError(f"checkpoint {directory} holds no model.safetensors (nor a sharded index of it)")
    return [directory / "model.safetensors"]


def load_weights(
    module: nn.Module,
    path: Path | Sequence[Path],
    device: torch.device,
    dtype: torch.dtype,
    prefixes: tuple[str, ...],
    stored: Collection[str] = (),
    mapped: Collection[str] = (),
) -> None:
    """Load the tensors under `prefixes` from a safetensors file (or the shards of one) into a meta-initialised
    `module`, each read straight to `device` and cast to `dtype`, but for those named in `stored` (kept in the dtype
    the file stores them in) and in `mapped` (on a CPU: kept in the file, memory-mapped, so that only the parts read
    are resident: a table of which a request reads a few rows)."""
    expected = dict(module.state_dict(keep_vars=True))
    loaded: dict[str, torch.Tensor] = {}
    paths = [path] if isinstance(path, Path) else list(path)
    for file in paths:
        try:
            with safe_open(str(file), framework="pt", device=str(device)) as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    if not (key.startswith(prefixes) and key in expected):
                        continue
                    if key in mapped and device.type == "cpu":
                        loaded[key] = map_tensor(file, key)
                        continue
                    tensor = handle.get_tensor(key)
                    if key in stored or not tensor.is_floating_point():
                        # Always a copy: on a CPU the file's tensors view one mapping of it, and a tensor still
                        # viewing it would keep every page read during the load resident.
                        loaded[key] = tensor.clone() if tensor.device.type == "cpu" else tensor
                    else:
                        loaded[key] = tensor.to(dtype, copy=True)
        except (OSError, RuntimeError, ValueError, SafetensorError) as exc:
            raise CheckpointError(f"cannot read weights from {file}: {exc}") from exc
    named = paths[0]  # by the errors below: the file, or the first shard
    missing = sorted(set(expected) - set(loaded))
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise CheckpointError(f"{named} lacks weights this model needs: {shown}")
    for key, tensor in loaded.items():
        if tensor.shape != expected[key].shape:
            raise CheckpointError(
                f"{named}: {key} has shape {tuple(tensor.shape)}, the config implies {tuple(expected[key].shape)}"
            )
    module.load_state_dict(loaded, assign=True, strict=True)
    for sub in module.modules():
        if isinstance(sub, Rotary):
            sub.reset(device)


# safetensors dtypes that can be memory-mapped: (numpy dtype of the same width, torch dtype to view it as)
MAPPABLE_DTYPES = {
    "BF16": (np.uint16, torch.bfloat16),
    "F16": (np.float16, torch.float16),
    "F32": (np.float32, torch.float32),
}


def map_tensor(path: Path, key: str) -> torch.Tensor:
    """One tensor of a safetensors file, memory-mapped copy-on-write: its pages are read from the file when first
    touched. The format: an 8-byte little-endian header length, a JSON header giving each tensor's dtype, shape
    and byte range in the data that follows."""
    with path.open("rb") as handle:
        (header_length,) = struct.unpack("<Q", handle.read(8))
        entry = json.loads(handle.read(header_length))[key]
    if entry["dtype"] not in MAPPABLE_DTYPES:
        raise CheckpointError(f"{path}: {key} is stored as {entry['dtype']}, which cannot be memory-mapped")
    numpy_dtype, torch_dtype = MAPPABLE_DTYPES[entry["dtype"]]
    begin, _ = entry["data_offsets"]
    array = np.memmap(path, dtype=numpy_dtype, mode="c", offset=8 + header_length + begin, shape=tuple(entry["shape"]))
    return torch.from_numpy(array).view(torch_dtype)


FINGERPRINT_FILES = (
    "config.json",
    "model.safetensors",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
)
FINGERPRINT_SPAN = 1 << 20


def checkpoint_fingerprint(directory: Path, files: Sequence[str] = FINGERPRINT_FILES) -> str:
    """A cheap identity for a checkpoint's content: the configs, and the sizes, first and last MiB of the
    weight files (headers and tensor bytes), without reading gigabytes (`files`: a TTS checkpoint's by default)."""
    digest = hashlib.sha256()
    for name in files:
        path = directory / name
        size = path.stat().st_size
        digest.update(f"{name}:{size}".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(FINGERPRINT_SPAN))
            if size > 2 * FINGERPRINT_SPAN:
                handle.seek(-FINGERPRINT_SPAN, os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()[:16]
