"""Finding a checkpoint (local directory or hub id) and loading safetensors straight onto a device."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

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


def resolve_checkpoint(name_or_path: str | os.PathLike) -> Path:
    """A local directory as it is, or a hub id downloaded (or found in the cache when HF_HUB_OFFLINE=1)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        directory = path
    elif path.exists():
        raise CheckpointError(f"{path} is a file; a checkpoint is a directory")
    elif str(name_or_path).count("/") != 1 or str(name_or_path).startswith((".", "/", "~")):
        raise CheckpointError(f"checkpoint directory {name_or_path} does not exist (nor is it a hub id like Org/Name)")
    else:
        directory = _download(str(name_or_path))
    missing = [name for name in REQUIRED_FILES if not (directory / name).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {directory} is missing {', '.join(missing)}")
    return directory


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    try:
        return Path(snapshot_download(repo_id, local_files_only=offline))
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


def load_weights(
    module: nn.Module, path: Path, device: torch.device, dtype: torch.dtype, prefixes: tuple[str, ...]
) -> None:
    """Load the tensors under `prefixes` from a safetensors file into a meta-initialised `module`, each
    read straight to `device` and cast to `dtype`."""
    expected = dict(module.state_dict(keep_vars=True))
    loaded: dict[str, torch.Tensor] = {}
    try:
        with safe_open(str(path), framework="pt", device=str(device)) as handle:
            for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                if key.startswith(prefixes) and key in expected:
                    tensor = handle.get_tensor(key)
                    loaded[key] = tensor.to(dtype) if tensor.is_floating_point() else tensor
    except (OSError, RuntimeError, ValueError, SafetensorError) as exc:
        raise CheckpointError(f"cannot read weights from {path}: {exc}") from exc
    missing = sorted(set(expected) - set(loaded))
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise CheckpointError(f"{path} lacks weights this model needs: {shown}")
    for key, tensor in loaded.items():
        if tensor.shape != expected[key].shape:
            raise CheckpointError(
                f"{path}: {key} has shape {tuple(tensor.shape)}, the config implies {tuple(expected[key].shape)}"
            )
    module.load_state_dict(loaded, assign=True, strict=True)
    for sub in module.modules():
        if isinstance(sub, Rotary):
            sub.reset(device)


FINGERPRINT_FILES = (
    "config.json",
    "model.safetensors",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
)
FINGERPRINT_SPAN = 1 << 20


def checkpoint_fingerprint(directory: Path) -> str:
    """A cheap identity for a checkpoint's content: the configs, and the sizes, first and last MiB of the
    weight files (headers and tensor bytes), without reading gigabytes."""
    digest = hashlib.sha256()
    for name in FINGERPRINT_FILES:
        path = directory / name
        size = path.stat().st_size
        digest.update(f"{name}:{size}".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(FINGERPRINT_SPAN))
            if size > 2 * FINGERPRINT_SPAN:
                handle.seek(-FINGERPRINT_SPAN, os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()[:16]
