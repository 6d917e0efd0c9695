"""The audio output cache: the memory LRU, the cache key, and the Redis backend against a real redis-server."""

from __future__ import annotations

import asyncio
import logging
import time
from enum import IntEnum

import numpy as np
import pytest

from qwen3_tts_server.service.speech.audio_cache import (
    CachedAudio,
    MemoryAudioCache,
    RedisAudioCache,
    build_audio_cache,
    cache_key,
)
from qwen3_tts_server.testing.live_server import free_port


def entry(size: int, fill: bytes = b"a", **headers: str) -> CachedAudio:
    return CachedAudio(fill * size, "audio/mpeg", frames=size, text_tokens=3, headers=dict(headers))


def run(coro):
    return asyncio.run(coro)


# --- memory -------------------------------------------------------------------------------------------


def test_memory_hits_and_misses_are_counted():
    async def scenario():
        cache = MemoryAudioCache(max_entries=4, max_bytes=1000)
        assert await cache.get("k") is None
        await cache.put("k", entry(10, X_Language="en"))
        got = await cache.get("k")
        await cache.get("other")
        return cache, got

    cache, got = run(scenario())
    assert got == entry(10, X_Language="en")
    assert (cache.hits, cache.misses, cache.evictions) == (1, 2, 0)
    assert (cache.entries, cache.size_bytes, cache.backend) == (1, 10, "memory")


def test_memory_get_refreshes_recency():
    async def scenario():
        cache = MemoryAudioCache(max_entries=2, max_bytes=1000)
        await cache.put("a", entry(1))
        await cache.put("b", entry(1))
        await cache.get("a")  # now "b" is the least recently used
        await cache.put("c", entry(1))
        return [await cache.get(k) is not None for k in "abc"], cache.evictions

    assert run(scenario()) == ([True, False, True], 1)


def test_memory_evicts_by_entry_count_in_lru_order():
    async def scenario():
        cache = MemoryAudioCache(max_entries=3, max_bytes=1000)
        for key in "abcde":
            await cache.put(key, entry(1))
        return [await cache.get(k) is not None for k in "abcde"], cache.evictions, cache.entries

    assert run(scenario()) == ([False, False, True, True, True], 2, 3)


def test_memory_evicts_several_entries_to_fit_a_large_one():
    async def scenario():
        cache = MemoryAudioCache(max_entries=10, max_bytes=100)
        for key in "abcd":
            await cache.put(key, entry(25))
        await cache.put("big", entry(70))  # needs 70 of 100: a, b and c must go
        return [await cache.get(k) is not None for k in ["a", "b", "c", "d", "big"]], cache

    present, cache = run(scenario())
    assert present == [False, False, False, True, True]
    assert (cache.evictions, cache.entries, cache.size_bytes) == (3, 2, 95)


def test_memory_refuses_an_entry_over_max_bytes_and_evicts_nothing():
    async def scenario():
        cache = MemoryAudioCache(max_entries=10, max_bytes=100)
        await cache.put("a", entry(60))
        await cache.put("huge", entry(101))
        return await cache.get("huge"), await cache.get("a"), cache

    huge, kept, cache = run(scenario())
    assert huge is None and kept is not None
    assert (cache.evictions, cache.entries, cache.size_bytes) == (0, 1, 60)


def test_memory_entry_of_exactly_max_bytes_is_stored():
    async def scenario():
        cache = MemoryAudioCache(max_entries=10, max_bytes=100)
        await cache.put("a", entry(1))
        await cache.put("full", entry(100))
        return await cache.get("full"), cache

    full, cache = run(scenario())
    assert full is not None and (cache.entries, cache.size_bytes, cache.evictions) == (1, 100, 1)


def test_memory_overwrite_keeps_byte_accounting_exact():
    async def scenario():
        cache = MemoryAudioCache(max_entries=2, max_bytes=100)
        await cache.put("a", entry(40))
        await cache.put("b", entry(40))
        await cache.put("a", entry(10, b"z"))  # replaces: no eviction, 50 bytes in all
        sizes = (cache.entries, cache.size_bytes, cache.evictions)
        await cache.put("a", entry(60, b"y"))  # 40 + 60 fits exactly
        after = (cache.entries, cache.size_bytes, cache.evictions)
        return sizes, after, await cache.get("a"), await cache.get("b")

    sizes, after, a, b = run(scenario())
    assert sizes == (2, 50, 0)
    assert after == (2, 100, 0)
    assert a == entry(60, b"y") and b is not None


def test_memory_overwrite_counts_against_the_entry_limit_once():
    async def scenario():
        cache = MemoryAudioCache(max_entries=2, max_bytes=100)
        await cache.put("a", entry(1))
        await cache.put("b", entry(1))
        await cache.put("b", entry(2))
        return cache.entries, cache.evictions, await cache.get("a")

    entries, evictions, a = run(scenario())
    assert (entries, evictions) == (2, 0) and a is not None


def test_memory_clear_returns_the_count():
    async def scenario():
        cache = MemoryAudioCache(max_entries=10, max_bytes=100)
        for key in "abc":
            await cache.put(key, entry(5))
        removed = await cache.clear()
        return removed, cache.entries, cache.size_bytes, await cache.get("a"), await cache.clear()

    assert run(scenario()) == (3, 0, 0, None, 0)


def test_memory_rejects_non_positive_bounds():
    with pytest.raises(ValueError):
        MemoryAudioCache(max_entries=0, max_bytes=10)
    with pytest.raises(ValueError):
        MemoryAudioCache(max_entries=10, max_bytes=0)


# --- cache_key ----------------------------------------------------------------------------------------

BASE = {
    "model": "Qwen3-TTS-12Hz-0.6B-CustomVoice@sha256:abc",
    "segments": ["Hello there.", "How are you?"],
    "voice": {"kind": "speaker", "id": "vivian"},
    "languages": ["English", "English"],
    "instructions": None,
    "format": "mp3",
    "speed": 1.0,
    "sample_rate": 24000,
    "seed": 7,
    "sampling": {"temperature": 0.9, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.05, "greedy": False},
}


def test_cache_key_is_stable_across_dict_order():
    reordered = dict(reversed(list(BASE.items())))
    reordered["sampling"] = dict(reversed(list(BASE["sampling"].items())))
    assert cache_key(BASE) == cache_key(reordered)
    assert len(cache_key(BASE)) == 64 and int(cache_key(BASE), 16) >= 0


@pytest.mark.parametrize(
    "field, value",
    [
        ("model", "Qwen3-TTS-12Hz-1.7B-CustomVoice@sha256:abc"),
        ("segments", ["Hello there.", "How are you!"]),
        ("segments", ["Hello there. How are you?"]),  # same text, other segmentation
        ("segments", ["How are you?", "Hello there."]),
        ("voice", {"kind": "speaker", "id": "ryan"}),
        ("voice", {"kind": "clone", "id": "vivian"}),
        ("languages", ["English", "German"]),
        ("instructions", ""),
        ("instructions", "Speak softly."),
        ("format", "wav"),
        ("speed", 1.25),
        ("speed", 1.0000000000000002),  # the next float after 1.0
        ("sample_rate", 16000),
        ("seed", 8),
        ("seed", None),
        ("sampling", {**BASE["sampling"], "temperature": 0.91}),
        ("sampling", {**BASE["sampling"], "greedy": True}),
        ("sampling", {**BASE["sampling"], "top_k": None}),
        ("sampling", {k: v for k, v in BASE["sampling"].items() if k != "top_k"}),
        ("extra", None),  # a new field, even a null one
    ],
)
def test_cache_key_changes_with_any_single_field(field, value):
    assert cache_key({**BASE, field: value}) != cache_key(BASE)


def test_cache_key_tells_one_and_one_point_zero_and_true_apart():
    keys = {cache_key({"x": v}) for v in (1, 1.0, True, "1", [1], None, 0, False)}
    assert len(keys) == 8


def test_cache_key_does_not_collide_across_nesting_or_string_boundaries():
    assert cache_key({"a": ["b", "c"]}) != cache_key({"a": ["b,c"]})
    assert cache_key({"a": "b", "c": "d"}) != cache_key({"a": {"c": "d"}})
    assert cache_key({"a": 'x","b":"y'}) != cache_key({"a": "x", "b": "y"})


def test_cache_key_treats_tuples_as_lists_and_enums_as_their_value():
    class Rate(IntEnum):
        LOW = 16000

    assert cache_key({"s": ("a", "b")}) == cache_key({"s": ["a", "b"]})
    assert cache_key({"sample_rate": Rate.LOW}) == cache_key({"sample_rate": 16000})


def test_cache_key_accepts_any_str_including_lone_surrogates():
    # json.loads('"\\ud800"') yields a lone surrogate: request text can hold one.
    assert cache_key({"text": "\ud800"}) != cache_key({"text": "\ud801"})
    assert cache_key({"text": "日本語"}) != cache_key({"text": "日本"})


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), 1j, {"nested": [b"x"]}, {1: "int key"}])
def test_cache_key_rejects_unsupported_types(value):
    with pytest.raises(TypeError):
        cache_key({"field": value})


# --- build_audio_cache --------------------------------------------------------------------------------


def test_build_audio_cache_picks_the_backend():
    assert build_audio_cache(0, 1000, None, 60) is None
    assert build_audio_cache(0, 1000, "redis://localhost:1", 60) is None
    memory = build_audio_cache(5, 1000, None, 60)
    assert isinstance(memory, MemoryAudioCache) and (memory.max_entries, memory.max_bytes) == (5, 1000)

    async def scenario():
        cache = build_audio_cache(5, 1000, "redis://localhost:1/0", 60)
        await cache.close()
        return cache

    remote = run(scenario())
    assert isinstance(remote, RedisAudioCache) and remote.backend == "redis"
    assert (remote.max_entry_bytes, remote.ttl_ms) == (1000, 60_000)


# --- Redis --------------------------------------------------------------------------------------------


def test_redis_round_trip_keeps_bytes_and_metadata(redis_server):
    stored = CachedAudio(bytes(range(256)) * 3, "audio/wav", 42, 17, {"X-Language": "German", "X-Segments": "2"})

    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60)
        try:
            miss = await cache.get("k")
            await cache.put("k", stored)
            hit = await cache.get("k")
            return miss, hit, (cache.hits, cache.misses, cache.errors)
        finally:
            await cache.close()

    miss, hit, counters = run(scenario())
    assert miss is None and hit == stored
    assert counters == (1, 1, 0)


def test_redis_round_trip_of_empty_audio_and_headers(redis_server):
    stored = CachedAudio(b"", "audio/pcm", 0, 0, {})

    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60)
        try:
            await cache.put("k", stored)
            return await cache.get("k")
        finally:
            await cache.close()

    assert run(scenario()) == stored


def test_redis_stores_numpy_counts_as_plain_ints(redis_server):
    stored = CachedAudio(b"abc", "audio/mpeg", np.int64(5), np.int32(2), {"X-Segments": "1"})

    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60)
        try:
            await cache.put("k", stored)
            return await cache.get("k"), cache.errors
        finally:
            await cache.close()

    got, errors = run(scenario())
    assert got == CachedAudio(b"abc", "audio/mpeg", 5, 2, {"X-Segments": "1"}) and errors == 0
    assert type(got.frames) is int and type(got.text_tokens) is int


@pytest.mark.parametrize(("ttl_seconds", "expires"), [(30, True), (0, False)])
def test_redis_applies_the_ttl(redis_server, ttl_seconds, expires):
    """Entries expire after the TTL; a TTL of 0 stores them without expiry (Redis's memory policy bounds them)."""

    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=ttl_seconds, prefix="p:")
        try:
            await cache.put("k", entry(10))
        finally:
            await cache.close()

    run(scenario())
    with redis_server.client() as client:
        pttl = client.pttl("p:k")
    assert 0 < pttl <= 30_000 if expires else pttl == -1


def test_redis_instances_on_one_server_share_entries(redis_server):
    async def scenario():
        first = RedisAudioCache(redis_server.url, ttl_seconds=60)
        second = RedisAudioCache(redis_server.url, ttl_seconds=60)
        try:
            await first.put("k", entry(10, X_Segments="1"))
            return await second.get("k"), second.hits
        finally:
            await first.close()
            await second.close()

    got, hits = run(scenario())
    assert got == entry(10, X_Segments="1") and hits == 1


def test_redis_clear_removes_only_our_prefix(redis_server):
    # The brackets would be a glob class if the prefix went into SCAN MATCH unescaped ("t1:x" would match).
    prefix = "t[1]:"
    with redis_server.client() as client:
        client.set("t1:x", b"foreign")
        client.set("other:key", b"foreign")

    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60, prefix=prefix)
        neighbour = RedisAudioCache(redis_server.url, ttl_seconds=60, prefix="n:")
        try:
            for i in range(1200):  # more than one SCAN/DEL batch
                await cache.put(f"k{i}", entry(1))
            await neighbour.put("k0", entry(1))
            removed = await cache.clear()
            return removed, await cache.get("k0"), await neighbour.get("k0"), await cache.clear()
        finally:
            await cache.close()
            await neighbour.close()

    removed, ours, theirs, again = run(scenario())
    assert (removed, ours, again) == (1200, None, 0)
    assert theirs is not None
    with redis_server.client() as client:
        assert client.get("t1:x") == b"foreign" and client.get("other:key") == b"foreign"
        assert client.dbsize() == 3


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"not a cache entry at all",
        b"Q3TA\x01\x00\x00\x10\x00{}",  # header length past the end
        b"Q3TA\x01\x00\x00\x00\x02{}audio",  # header missing its fields
        b"Q3TA\x01\x00\x00\x00\x05[1,2]audio",  # header not an object
        b"Q3TA\x01\x00\x00\x00\x02\xff\xfeaudio",  # header not UTF-8
    ],
)
def test_redis_corrupt_value_is_a_miss(redis_server, blob):
    with redis_server.client() as client:
        client.set("qwen3-tts:audio:k", blob)

    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60)
        try:
            got = await cache.get("k")
            await cache.put("k", entry(4))  # a fresh put replaces the corrupt value
            return got, await cache.get("k"), (cache.hits, cache.misses, cache.errors)
        finally:
            await cache.close()

    got, repaired, counters = run(scenario())
    assert got is None and repaired == entry(4)
    assert counters == (1, 1, 0)


def test_redis_refuses_entries_over_the_size_cap(redis_server):
    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60, max_entry_bytes=8)
        try:
            await cache.put("small", entry(8))
            await cache.put("big", entry(9))
            return await cache.get("small"), await cache.get("big")
        finally:
            await cache.close()

    small, big = run(scenario())
    assert small is not None and big is None


def test_redis_stopped_server_is_a_miss_and_a_skipped_put(redis_server, caplog):
    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60, retry_after=0)
        try:
            await cache.put("k", entry(10))
            assert await cache.get("k") is not None
            redis_server.stop()
            started = time.monotonic()
            results = []
            for _ in range(5):
                results.append(await cache.get("k"))
                await cache.put("k2", entry(10))
            return results, time.monotonic() - started, (cache.hits, cache.misses, cache.errors)
        finally:
            await cache.close()

    with caplog.at_level(logging.WARNING, logger="qwen3_tts_server.service.speech.audio_cache"):
        results, elapsed, counters = run(scenario())
    assert results == [None] * 5
    assert elapsed < 3, "a dead Redis must not stall requests in retries"
    assert counters == (1, 5, 10)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "failures are logged once per interval, not per request"


def test_redis_unreachable_from_the_start_never_raises():
    port = free_port()  # nothing listens there once the probe is closed

    async def scenario():
        cache = RedisAudioCache(f"redis://127.0.0.1:{port}/0", ttl_seconds=60)
        try:
            got = await cache.get("k")
            await cache.put("k", entry(1))
            return got, await cache.get("k"), (cache.misses, cache.errors)
        finally:
            await cache.close()

    got, again, (misses, errors) = run(scenario())
    assert got is None and again is None
    # After the first failure the server is left alone for retry_after: the later calls do not try it.
    assert (misses, errors) == (2, 1)


def test_redis_is_used_again_once_the_server_is_back(redis_server):
    async def scenario():
        cache = RedisAudioCache(redis_server.url, ttl_seconds=60, retry_after=0.2)
        try:
            await cache.put("k", entry(1))
            redis_server.stop()
            down = await cache.get("k")
            redis_server.start()  # same port, empty (no persistence)
            skipped = await cache.get("k")  # still within retry_after: not tried
            await asyncio.sleep(0.25)
            await cache.put("k", entry(2))
            return down, skipped, await cache.get("k")
        finally:
            await cache.close()

    down, skipped, back = run(scenario())
    assert down is None and skipped is None
    assert back == entry(2)
