"""A cloned voice, ready to condition the talker: the reference speaker's embedding (x-vector) and, in
in-context mode, the reference speech as codec codes with its transcript.

A prompt is tied to the checkpoint that built it and identified by a content hash of (reference audio
bytes, transcript, mode, checkpoint), so a voice library can store it once and reuse it for free.
On disk it is two files: `NAME.safetensors` (tensors) and `NAME.json` (the rest).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from ...errors import InvalidInputError

Mode = Literal["x_vector", "in_context"]
MODES: tuple[Mode, ...] = ("x_vector", "in_context")
FORMAT_VERSION = 1


def voice_prompt_id(audio_sha256: str, ref_text: str | None, mode: Mode, checkpoint: str) -> str:
    key = json.dumps({"audio": audio_sha256, "text": ref_text, "mode": mode, "checkpoint": checkpoint})
    return "voice_" + hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class VoicePrompt:
    id: str
    mode: Mode
    checkpoint: str  # fingerprint of the checkpoint that built it
    speaker_embedding: torch.Tensor  # (hidden,) float32, CPU
    ref_codes: torch.Tensor | None = None  # (frames, 16) int64, CPU; in-context mode only
    ref_text: str | None = None
    ref_text_ids: tuple[int, ...] | None = None  # the transcript's prompt tokens (in-context mode)

    @property
    def in_context(self) -> bool:
        return self.mode == "in_context"

    def save(self, path: str | Path) -> None:
        """Write `path` with the suffixes .safetensors and .json."""
        path = Path(path)
        tensors = {"speaker_embedding": self.speaker_embedding.contiguous()}
        if self.ref_codes is not None:
            tensors["ref_codes"] = self.ref_codes.contiguous()
        # Bytes written by Python, so that a full disk raises OSError (ENOSPC), which the library answers with a 507.
        path.with_suffix(".safetensors").write_bytes(save(tensors))
        meta = {
            "format": FORMAT_VERSION,
            "id": self.id,
            "mode": self.mode,
            "checkpoint": self.checkpoint,
            "ref_text": self.ref_text,
            "ref_text_ids": None if self.ref_text_ids is None else list(self.ref_text_ids),
        }
        path.with_suffix(".json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> VoicePrompt:
        path = Path(path)
        try:
            meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            tensors = load_file(str(path.with_suffix(".safetensors")))
        except (OSError, ValueError, SafetensorError) as exc:
            raise InvalidInputError(f"cannot read the voice prompt {path}: {exc}", param="voice") from None
        if meta.get("format") != FORMAT_VERSION or meta.get("mode") not in MODES or "speaker_embedding" not in tensors:
            raise InvalidInputError(f"{path} is not a voice prompt this version can read", param="voice")
        if meta["mode"] == "in_context" and "ref_codes" not in tensors:
            raise InvalidInputError(f"{path}: an in-context voice prompt lacks its reference codes", param="voice")
        return cls(
            id=meta["id"],
            mode=meta["mode"],
            checkpoint=meta["checkpoint"],
            speaker_embedding=tensors["speaker_embedding"],
            ref_codes=tensors.get("ref_codes"),
            ref_text=meta.get("ref_text"),
            ref_text_ids=None if meta.get("ref_text_ids") is None else tuple(meta["ref_text_ids"]),
        )
