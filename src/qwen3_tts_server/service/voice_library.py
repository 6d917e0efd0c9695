"""The voice library: named voices persisted in a data directory, and an LRU of clone prompts.

A voice is either an `audio_sample` voice (a clone prompt computed once from uploaded audio; Base models
speak it) or a `prompt` voice (a stored voice description; VoiceDesign models speak it). Each voice is a
folder `voices/<id>/` holding `voice.json` and, for audio-sample voices, the clone prompt
(`prompt.safetensors` + `prompt.json`). A folder is written under a temporary name and renamed into place,
so after a crash (kill -9 included) a voice is either complete or absent; leftovers are swept at start.
A disk that is full or read-only refuses a change whole: a 507 that says which, no half-written voice left
behind, and the library as it was. Ids are generated here and checked against their pattern before any path is
built from one.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from ..errors import InsufficientStorageError, NotFoundError
from ..model.voice_prompt import Mode, VoicePrompt

VoiceType = Literal["audio_sample", "prompt"]
_ID = re.compile(r"voice_[0-9a-f]{32}")
_TEMP_PREFIX = ".incoming-"
_TRASH_PREFIX = ".deleted-"
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "qwen3-tts-server"


@dataclass(frozen=True)
class StoredVoice:
    id: str
    name: str
    created_at: int  # Unix seconds
    type: VoiceType
    prompt: str | None = None  # the voice description of a `prompt` voice
    consent: str | None = None
    mode: Mode | None = None  # audio-sample voices: x_vector or in_context
    ref_text: str | None = None
    prompt_id: str | None = None  # content hash of the clone prompt (audio, transcript, mode, checkpoint)

    def public(self) -> dict:
        """OpenAI's `audio.voice` object, plus the cloning mode of audio-sample voices."""
        body = {"object": "audio.voice", "id": self.id, "name": self.name, "created_at": self.created_at}
        body["type"] = self.type
        if self.prompt is not None:
            body["prompt"] = self.prompt
        if self.mode is not None:
            body["mode"] = self.mode
        return body


class PromptCache:
    """Clone prompts by content hash, least recently used evicted beyond `max_entries` (0 keeps none)."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._prompts: OrderedDict[str, VoicePrompt] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, prompt_id: str, count: bool = True) -> VoicePrompt | None:
        """The cached prompt or None; `count` adds the lookup to the hit/miss statistics."""
        with self._lock:
            prompt = self._prompts.get(prompt_id)
            if count:
                self.hits += prompt is not None
                self.misses += prompt is None
            if prompt is None:
                return None
            self._prompts.move_to_end(prompt_id)
            return prompt

    def put(self, prompt: VoicePrompt) -> None:
        with self._lock:
            self._prompts[prompt.id] = prompt
            self._prompts.move_to_end(prompt.id)
            while len(self._prompts) > self.max_entries:
                self._prompts.popitem(last=False)
                self.evictions += 1

    def clear(self) -> int:
        """Forget every prompt (library voices reload theirs from disk); returns how many there were."""
        with self._lock:
            held = len(self._prompts)
            self._prompts.clear()
        return held

    def __len__(self) -> int:
        return len(self._prompts)


class VoiceLibrary:
    def __init__(self, data_dir: str | Path, cache: PromptCache):
        self.root = Path(data_dir) / "voices"
        self.root.mkdir(parents=True, exist_ok=True)
        self.cache = cache
        self._lock = threading.Lock()
        self._sweep()
        self._voices = {voice.id: voice for voice in map(self._read, self._folders())}

    def list(self) -> list[StoredVoice]:
        return sorted(self._voices.values(), key=lambda voice: (voice.created_at, voice.id))

    def find(self, voice_id: str) -> StoredVoice | None:
        return self._voices.get(voice_id)

    def get(self, voice_id: str) -> StoredVoice:
        voice = self.find(voice_id)
        if voice is None:
            raise NotFoundError(f"no voice {voice_id!r} in the voice library", param="voice_id")
        return voice

    def add(
        self, name: str, prompt: VoicePrompt | None = None, description: str | None = None, consent: str | None = None
    ) -> StoredVoice:
        """Store a voice from a clone prompt (audio-sample voice) or a voice description (prompt voice)."""
        voice = StoredVoice(
            id="voice_" + secrets.token_hex(16),
            name=name,
            created_at=int(time.time()),
            type="audio_sample" if prompt is not None else "prompt",
            prompt=description,
            consent=consent,
            mode=prompt.mode if prompt else None,
            ref_text=prompt.ref_text if prompt else None,
            prompt_id=prompt.id if prompt else None,
        )
        staging = self.root / f"{_TEMP_PREFIX}{voice.id}"
        with _disk_refusals("the voice was not stored"):
            try:
                staging.mkdir()
                if prompt is not None:
                    prompt.save(staging / "prompt")
                (staging / "voice.json").write_text(
                    json.dumps(asdict(voice), ensure_ascii=False, indent=1), encoding="utf-8"
                )
                _fsync_folder(staging)
                with self._lock:
                    staging.rename(self.root / voice.id)
                    _fsync_folder(self.root)
                    self._voices[voice.id] = voice
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)  # nothing half-written stays behind
                raise
        if prompt is not None:
            self.cache.put(prompt)
        return voice

    def delete(self, voice_id: str) -> StoredVoice:
        with self._lock:
            voice = self.get(voice_id)
            trash = self.root / f"{_TRASH_PREFIX}{voice.id}"
            with _disk_refusals(f"voice {voice.id} was not deleted"):
                (self.root / voice.id).rename(trash)  # gone at once; the files go after
            del self._voices[voice.id]
        shutil.rmtree(trash, ignore_errors=True)
        return voice

    def clone_prompt(self, voice: StoredVoice) -> VoicePrompt:
        """The clone prompt of an audio-sample voice, from the cache or its folder."""
        prompt = self.cache.get(voice.prompt_id)
        if prompt is None:
            prompt = VoicePrompt.load(self.root / voice.id / "prompt")
            self.cache.put(prompt)
        return prompt

    def _folders(self) -> list[Path]:
        return [path for path in self.root.iterdir() if path.is_dir() and _ID.fullmatch(path.name)]

    def _sweep(self) -> None:
        """Remove what a crash left half-written or half-deleted."""
        for path in self.root.iterdir():
            if path.name.startswith((_TEMP_PREFIX, _TRASH_PREFIX)):
                shutil.rmtree(path, ignore_errors=True)

    @staticmethod
    def _read(folder: Path) -> StoredVoice:
        return StoredVoice(**json.loads((folder / "voice.json").read_text(encoding="utf-8")))


@contextmanager
def _disk_refusals(outcome: str) -> Iterator[None]:
    """A full or read-only disk raised as the 507 it is for clients (`outcome`: what did not happen); any other
    failure as it is."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            raise InsufficientStorageError(f"the voice library's disk is full: {outcome}") from exc
        if exc.errno in _READ_ONLY:
            raise InsufficientStorageError(f"the voice library is read-only: {outcome}") from exc
        raise


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's files and its entry list to disk, so a rename after it publishes complete data."""
    for path in folder.iterdir():
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
