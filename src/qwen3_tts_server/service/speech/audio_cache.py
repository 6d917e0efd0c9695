"""The audio output cache: whole encoded speech responses, keyed by everything that changes their bytes.

A repeated request is answered from here without touching the engine. `cache_key` hashes a canonical
JSON encoding of the request fields the caller passes (model fingerprint, normalised text, voice,
languages, instructions, format, speed, sample rate, seed, sampling settings). Two backends:

- `MemoryAudioCache`: an in-process LRU bounded by entry count and by audio bytes.
- `RedisAudioCache`: shared between replicas, entries expire after a TTL. Redis is an optimisation,
  never a dependency of a request: when it is down or misbehaves, reads are misses and writes are skipped,
  with a rate-limited warning in the log.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import struct
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

# Bumped when the meaning of a key or the stored encoding changes, so old entries stop matching.
_KEY_VERSION = "qwen3-tts-audio-v1"


@dataclass(frozen=True)
class CachedAudio:
    """One cached response: the encoded body and what the route needs to answer with it.

    The memory backend hands out the stored object itself: treat `headers` as read-only.
    """

    audio: bytes
    media_type: str
    frames: int
    text_tokens: int
    headers: dict[str, str]


def _canonical(value: object) -> object:
    """`value` reduced to plain JSON types; anything whose encoding could be ambiguous is a TypeError."""
    # bool before int (bool is an int). Subclasses (IntEnum, StrEnum, numpy float64) reduce to their base
    # value; JSON keeps 1, 1.0 and true apart, so those three give different keys.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)  # json writes floats with repr: exact round trip
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for key, item in value.items():
            # json would silently turn 1 into "1"; only string keys keep the encoding one-to-one.
            if not isinstance(key, str):
                raise TypeError(f"cache key fields need string keys, got {type(key).__name__}: {key!r}")
            out[str(key)] = _canonical(item)
        return out
    raise TypeError(f"cannot use a {type(value).__name__} in an audio cache key: {value!r}")


def cache_key(fields: Mapping[str, object]) -> str:
    """The sha256 hex digest of `fields` in canonical JSON (sorted keys, no whitespace).

    Values may be None, bool, int, float, str, lists/tuples (the same key) and string-keyed mappings,
    nested freely; any other type raises TypeError. NaN and the infinities are accepted.
    """
    # ASCII escapes keep any str encodable, a lone surrogate from a JSON request included.
    encoded = json.dumps([_KEY_VERSION, _canonical(fields)], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()


class AudioCache(ABC):
    """A cache of encoded speech responses. Counters count since start, for the metrics."""

    backend: str

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.errors = 0  # backend failures swallowed (Redis only)

    @abstractmethod
    async def get(self, key: str) -> CachedAudio | None: ...

    @abstractmethod
    async def put(self, key: str, entry: CachedAudio) -> None: ...

    @abstractmethod
    async def clear(self) -> int:
        """Remove every entry of this cache; returns how many were removed."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections; the cache is unusable afterwards."""

    @property
    def entries(self) -> int | None:
        """Entries held now, or None where the backend cannot tell cheaply."""
        return None

    @property
    def hit_rate(self) -> float | None:
        """Hits over lookups since start (this process's lookups); None before the first."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None

    @property
    def size_bytes(self) -> int | None:
        """Audio bytes held now, or None where the backend cannot tell cheaply."""
        return None


class MemoryAudioCache(AudioCache):
    """An LRU bounded by `max_entries` and by `max_bytes` of audio; `get` refreshes recency.

    Meant for one event loop: no operation awaits, so each runs whole. An entry larger than `max_bytes` is
    not stored (and evicts nothing).
    """

    backend = "memory"

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be positive")
        super().__init__()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, CachedAudio] = OrderedDict()
        self._bytes = 0

    @property
    def entries(self) -> int:
        return len(self._items)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    async def get(self, key: str) -> CachedAudio | None:
        entry = self._items.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return entry

    async def put(self, key: str, entry: CachedAudio) -> None:
        size = len(entry.audio)
        if size > self.max_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= len(old.audio)
        while self._items and (len(self._items) >= self.max_entries or self._bytes + size > self.max_bytes):
            _, evicted = self._items.popitem(last=False)
            self._bytes -= len(evicted.audio)
            self.evictions += 1
        self._items[key] = entry
        self._bytes += size

    async def clear(self) -> int:
        removed = len(self._items)
        self._items.clear()
        self._bytes = 0
        return removed

    async def close(self) -> None:
        await self.clear()


# Stored value: magic, 4-byte big-endian header length, JSON header, then the audio bytes as they are.
_MAGIC = b"Q3TA\x01"
_LENGTH = struct.Struct(">I")


def _encode_entry(entry: CachedAudio) -> bytes:
    header = json.dumps(
        {
            "media_type": entry.media_type,
            "frames": int(entry.frames),
            "text_tokens": int(entry.text_tokens),
            "headers": {str(k): str(v) for k, v in entry.headers.items()},
        },
        separators=(",", ":"),
    ).encode("utf-8")
    return b"".join((_MAGIC, _LENGTH.pack(len(header)), header, entry.audio))


def _decode_entry(blob: bytes) -> CachedAudio | None:
    """The entry in `blob`, or None when it is not one this module wrote."""
    start = len(_MAGIC) + _LENGTH.size
    if len(blob) < start or not blob.startswith(_MAGIC):
        return None
    (length,) = _LENGTH.unpack_from(blob, len(_MAGIC))
    if start + length > len(blob):
        return None
    try:
        header = json.loads(blob[start : start + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    media_type, frames, tokens, headers = (header.get(k) for k in ("media_type", "frames", "text_tokens", "headers"))
    if (
        not isinstance(media_type, str)
        or type(frames) is not int
        or type(tokens) is not int
        or not isinstance(headers, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        return None
    return CachedAudio(blob[start + length :], media_type, frames, tokens, headers)


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


class RedisAudioCache(AudioCache):
    """Entries in Redis under `prefix`, each one binary value with a TTL; shared by every replica.

    `ttl_seconds <= 0` stores without expiry (then Redis's own maxmemory policy bounds the cache). Entries
    over `max_entry_bytes` of audio are not stored. After a failure Redis is left alone for
    `retry_after` seconds (calls are misses / skipped puts meanwhile), so a dead server costs a request at
    most one timeout per interval rather than one per call. Both default short: a Redis that is down or hung
    holds one request up by at most `timeout`, and one that comes back is used again within `retry_after`.
    """

    backend = "redis"
    _WARN_INTERVAL = 60.0

    def __init__(
        self,
        url: str,
        ttl_seconds: float,
        prefix: str = "qwen3-tts:audio:",
        *,
        max_entry_bytes: int | None = None,
        timeout: float = 0.25,
        retry_after: float = 1.0,
    ) -> None:
        # Imported here so the memory backend works without the redis package.
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError

        super().__init__()
        self.url = url
        self.prefix = prefix
        self.ttl_ms = max(1, round(ttl_seconds * 1000)) if ttl_seconds > 0 else None
        self.max_entry_bytes = max_entry_bytes
        self.retry_after = retry_after
        # A failed call is a miss. One immediate retry, after a lost connection only: a pooled connection that a
        # Redis restart closed fails its first command. Never after a timeout, which a hung Redis would cost twice.
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        self._client: Redis = Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=retry)
        self._down_until = -math.inf
        self._last_warning = -math.inf
        self._suppressed = 0

    def _failed(self, action: str, exc: BaseException) -> None:
        self.errors += 1
        now = time.monotonic()
        self._down_until = now + self.retry_after
        if now - self._last_warning >= self._WARN_INTERVAL:
            more = f" ({self._suppressed} more failures since the last warning)" if self._suppressed else ""
            log.warning("audio cache: Redis %s failed, serving without it: %r%s", action, exc, more)
            self._last_warning = now
            self._suppressed = 0
        else:
            self._suppressed += 1

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    async def get(self, key: str) -> CachedAudio | None:
        from redis.exceptions import RedisError

        entry = None
        if self._available():
            try:
                blob = await self._client.get(self.prefix + key)
            except (RedisError, OSError, asyncio.TimeoutError) as exc:
                self._failed("get", exc)
            else:
                if blob is not None:
                    entry = _decode_entry(blob)
                    if entry is None:
                        log.warning("audio cache: ignoring a corrupt Redis value under %s%s", self.prefix, key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    async def put(self, key: str, entry: CachedAudio) -> None:
        from redis.exceptions import RedisError

        if self.max_entry_bytes is not None and len(entry.audio) > self.max_entry_bytes:
            return
        if not self._available():
            return
        try:
            await self._client.set(self.prefix + key, _encode_entry(entry), px=self.ttl_ms)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            self._failed("set", exc)

    async def clear(self) -> int:
        """Delete every key under the prefix (SCAN + DEL; other keys untouched). Redis errors propagate:
        an operator asking for a clear should learn that it did not happen."""
        removed = 0
        batch: list[bytes] = []
        async for name in self._client.scan_iter(match=_glob_escape(self.prefix) + "*", count=500):
            batch.append(name)
            if len(batch) >= 500:
                removed += await self._client.delete(*batch)
                batch.clear()
        if batch:
            removed += await self._client.delete(*batch)
        return removed

    async def close(self) -> None:
        await self._client.aclose()


def build_audio_cache(max_entries: int, max_bytes: int, redis_url: str | None, ttl_seconds: float) -> AudioCache | None:
    """The configured cache: None when `max_entries` is 0, Redis when `redis_url` is set, else memory.

    With Redis, `max_bytes` caps a single entry and `max_entries` only switches the cache on.
    """
    if max_entries <= 0:
        return None
    if redis_url:
        return RedisAudioCache(redis_url, ttl_seconds, max_entry_bytes=max_bytes)
    return MemoryAudioCache(max_entries, max_bytes)
