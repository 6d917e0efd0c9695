"""The voice library: named voices persisted in a data directory, and an LRU of clone prompts.

A voice is either an `audio_sample` voice (a clone prompt computed once from uploaded audio; Base models
speak it) or a `prompt` voice (a stored voice description; VoiceDesign models speak it). Each voice is a
folder `voices/<id>/` holding `voice.json` and, for audio-sample voices, the clone prompt
(`prompt.safetensors` + `prompt.json`). A folder is written under a temporary name and renamed into place,
so after a crash (kill -9 included) a voice is either complete or absent; leftovers are swept at start.
A disk that is full or read-only refuses a change whole: a 507 that says which, no half-written voice left
behind, and the library as it was. Ids are generated here and checked against their pattern before any path is
built from one.

Several processes may share the directory (replicas on NFS or a ReadWriteMany volume): the disk is the truth and
what a process holds in memory only spares it reads. A listing reads the directory; a lookup opens the voice's
file (an open, unlike a stat, is revalidated with an NFS server), so a voice another process added is found and
one it deleted is gone, its clone prompt never served from this process's cache again. Ids are never reused, so a
folder of that id is that voice. A writer holds a lock beside its staging folder while it writes: a process
starting meanwhile sweeps only the leftovers nobody holds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
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

from ...errors import ConflictError, InsufficientStorageError, InvalidInputError, NotFoundError
from ...model.tts.voice_prompt import Mode, VoicePrompt

VoiceType = Literal["audio_sample", "prompt"]
_ID = re.compile(r"voice_[0-9a-f]{32}")
_TEMP_PREFIX = ".incoming-"
_TRASH_PREFIX = ".deleted-"
_LOCK_SUFFIX = ".lock"
_NAMES = ".names"  # its lock file orders the writers of every process: a name is checked and taken at once
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def voice_key(name: str) -> str:
    """A voice name as the earlier server matched it: lower case, spaces as underscores ("Uncle Fu" is
    uncle_fu)."""
    return name.strip().lower().replace(" ", "_")


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
        self._voices: dict[str, StoredVoice] = {}  # the voices this process has read, by id
        self._sweep()
        self.list()

    def list(self) -> list[StoredVoice]:
        """Every voice stored now, those other processes sharing the directory added or deleted included."""
        known = self._voices
        voices = {}
        for entry in os.scandir(self.root):
            if _ID.fullmatch(entry.name):
                voice = known.get(entry.name) or self._read(self.root / entry.name)
                if voice is not None:
                    voices[voice.id] = voice
        self._voices = voices
        return sorted(voices.values(), key=lambda voice: (voice.created_at, voice.id))

    def find(self, voice_id: str) -> StoredVoice | None:
        """The voice `voice_id` (an id, or a voice's name as `voice_key` matches it) if it is stored now (one open for
        a voice read before, one read otherwise)."""
        if not _ID.fullmatch(voice_id):
            return self.named(voice_id)
        folder = self.root / voice_id
        known = self._voices.get(voice_id)
        voice = known if known is not None and _present(folder / "voice.json") else self._read(folder)
        if voice is None:
            self._voices.pop(voice_id, None)
        else:
            self._voices[voice_id] = voice
        return voice

    def named(self, name: str) -> StoredVoice | None:
        """The voice of this name (names are unique, matched as `voice_key` matches them), if it is stored now; the
        newest, should a crash in the middle of a replacement have left two."""
        same = self._named_all(name)
        return same[-1] if same else None

    def _named_all(self, name: str) -> list[StoredVoice]:
        key = voice_key(name)
        return [voice for voice in self.list() if voice_key(voice.name) == key]

    def get(self, voice_id: str) -> StoredVoice:
        voice = self.find(voice_id)
        if voice is None:
            raise _not_found(voice_id)
        return voice

    def add(
        self,
        name: str,
        prompt: VoicePrompt | None = None,
        description: str | None = None,
        consent: str | None = None,
        replace: bool = False,
    ) -> StoredVoice:
        """Store a voice from a clone prompt (audio-sample voice) or a voice description (prompt voice). Names are
        unique: a name in use is a 409, unless `replace`, which deletes the voice that had it once this one is in
        place (`make-preset-voices` making them again)."""
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
        # The names' lock (held by writers in every process sharing the directory): a name is checked and taken
        # in one step.
        with _disk_refusals("the voice was not stored"), _claim(self.root / _NAMES, wait=True), _claim(staging, True):
            previous = self._named_all(name)
            if previous and not replace:
                taken = previous[-1]
                raise ConflictError(f"a voice named {taken.name!r} exists ({taken.id}): names are unique", "name")
            try:
                staging.mkdir()
                if prompt is not None:
                    prompt.save(staging / "prompt")
                (staging / "voice.json").write_text(
                    json.dumps(asdict(voice), ensure_ascii=False, indent=1), encoding="utf-8"
                )
                _fsync_files(staging)
                staging.rename(self.root / voice.id)
                _fsync_entries(self.root)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)  # nothing half-written stays behind
                raise
            self._voices[voice.id] = voice
            for replaced in previous:  # the new voice is in place (a crash here leaves it the newest: found first)
                with contextlib.suppress(NotFoundError):  # deleted by another process meanwhile
                    self.delete(replaced.id)
        if prompt is not None:
            self.cache.put(prompt)
        return voice

    def delete(self, voice_id: str) -> StoredVoice:
        voice = self.get(voice_id)
        trash = self.root / f"{_TRASH_PREFIX}{voice.id}"
        with _disk_refusals(f"voice {voice.id} was not deleted"):
            try:
                (self.root / voice.id).rename(trash)  # gone at once; the files go after
            except FileNotFoundError:  # another process sharing the directory deleted it first
                self._voices.pop(voice.id, None)
                raise _not_found(voice_id) from None
        self._voices.pop(voice.id, None)
        shutil.rmtree(trash, ignore_errors=True)
        return voice

    def clone_prompt(self, voice: StoredVoice) -> VoicePrompt:
        """The clone prompt of an audio-sample voice, from the cache or its folder; NotFoundError once the voice is
        deleted (here or by another process), whatever the cache holds."""
        folder = self.root / voice.id
        if not _present(folder / "voice.json"):
            raise _not_found(voice.id)
        prompt = self.cache.get(voice.prompt_id)
        if prompt is None:
            try:
                prompt = VoicePrompt.load(folder / "prompt")
            except InvalidInputError:
                if not _present(folder / "voice.json"):  # deleted while it was read
                    raise _not_found(voice.id) from None
                raise
            self.cache.put(prompt)
        return prompt

    def _sweep(self) -> None:
        """Remove what a crash left half-written or half-deleted, but no staging folder its writer (in any process
        sharing the directory) still holds."""
        for path in self.root.iterdir():
            if path.name.startswith(_TRASH_PREFIX):
                shutil.rmtree(path, ignore_errors=True)  # a delete elsewhere removing it too is no harm
            elif path.name.startswith(_TEMP_PREFIX):
                staging = path.with_name(path.name.removesuffix(_LOCK_SUFFIX))
                try:
                    with _claim(staging, wait=False) as held:
                        if held:
                            shutil.rmtree(staging, ignore_errors=True)
                except OSError:  # a read-only library keeps its leftovers
                    pass

    @staticmethod
    def _read(folder: Path) -> StoredVoice | None:
        """The voice in `folder`; None when there is none (never stored, or deleted meanwhile)."""
        try:
            text = (folder / "voice.json").read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None
        return StoredVoice(**json.loads(text))


def _not_found(voice_id: str) -> NotFoundError:
    return NotFoundError(f"no voice {voice_id!r} in the voice library", param="voice_id")


def _present(path: Path) -> bool:
    """Whether the file exists now: opened, not stat'ed, since an NFS client answers a stat from its attribute cache
    but checks with the server on an open (close-to-open consistency)."""
    try:
        os.close(os.open(path, os.O_RDONLY))
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


@contextmanager
def _claim(staging: Path, wait: bool) -> Iterator[bool]:
    """An exclusive lock on `<staging>.lock` (created if needed), yielding whether it is held: the writer waits for
    it and holds it from before its staging folder exists until after the folder is renamed into place; a sweep
    tries it without waiting and removes only what it holds. The lock file goes before the lock is let go, and a
    holder checks that the file it locked is still the one at the path (else a sweep removed it: it starts over).
    On NFS flock is a lock the server keeps (unless mounted with local_lock)."""
    path = staging.with_name(staging.name + _LOCK_SUFFIX)
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            yield False
            return
        try:
            current = os.stat(path).st_ino == os.fstat(descriptor).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(descriptor)
    try:
        yield True
    finally:
        path.unlink(missing_ok=True)
        os.close(descriptor)


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


def _fsync_files(folder: Path) -> None:
    """Flush a folder's files and its entry list to disk, so a rename after it publishes complete data."""
    for path in folder.iterdir():
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    _fsync_entries(folder)


def _fsync_entries(folder: Path) -> None:
    """Flush a folder's entry list (a rename into it) to disk."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
