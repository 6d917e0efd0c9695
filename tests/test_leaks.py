"""Nothing leaks: a few hundred mixed requests through a live server (streamed, whole-file, SSE, WebSocket
sessions that cancel, inline clones, output-cache hits, clients that leave at a random byte), then the engine's
rows, queued jobs, asyncio tasks, descriptors and threads are back where they were, the caches did not grow on
a second identical round, and neither did RSS beyond a few percent."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter

import pytest

from qwen3_tts_server.bench.traffic import (
    LEAVE_BY_BYTE,
    MIX,
    PCM_BYTES_PER_SAMPLE,
    Traffic,
    closed_loop,
    pick_kind,
    reference_wav,
)
from qwen3_tts_server.testing.live_server import LiveProcess, live_process

pytestmark = pytest.mark.slow

REQUESTS_PER_ROUND = 150
CONCURRENCY = 8
AUDIO_CACHE_ENTRIES = 16
# Frames one request may make: what leaks is per request, not per frame, so short answers find it as well, ten times
# sooner than the 40-120 frames of a sentence. 12 frames outlast every client that leaves, so each still leaves
# mid-stream.
MAX_REQUEST_FRAMES = 12
SAMPLES_PER_FRAME = 1920  # 80 ms at 24 kHz
REQUEST_TIMEOUT = 300  # a guard against a hang, not a speed limit: on a busy machine 17 requests took over 60 s
RSS_GROWTH = 0.03  # a second identical round may grow RSS by this share at most
# The event loop's default executor starts threads on demand, up to this many (ThreadPoolExecutor's default): the
# count may rise by that much after the warm-up, where a leak (a thread per session, per clone) would add dozens.
POOL_THREADS = min(32, (os.cpu_count() or 1) + 4)


def state(live: LiveProcess) -> dict:
    health = live.health()
    return {
        "engine": (health["queue_depth"], health["active_streams"], health["paused_streams"], health["rows_held"]),
        "engine_thread": health["engine_thread"],
        "tasks": health["process"]["asyncio_tasks"],
        "fds": health["process"]["open_fds"],
        "threads": health["process"]["threads"],
        "prompt_cache": health["voice_library"]["cached_prompts"],
        "text_cache": health["text_cache_entries"],
        "audio_cache": health["audio_cache"]["entries"],
        "rss": health["memory"]["rss_bytes"],
    }


def settled(live: LiveProcess, baseline: dict, within: float = 60.0) -> dict:
    """The server's state once its engine is idle, its engine thread has ended (it lingers a moment after the last
    job, and its thread counts), and its tasks and descriptors are back at `baseline` (closed connections take a
    moment to be reaped), or as it is after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        now = state(live)
        idle = now["engine"] == (0, 0, 0, 0) and not now["engine_thread"]
        back = idle and now["tasks"] <= baseline["tasks"] and now["fds"] <= baseline["fds"]
        if back or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def send_round(live: LiveProcess, voice: str, references: list[bytes], kinds: list[str], seed: int) -> Counter:
    async def run():
        traffic = Traffic.open(live.base, voice, references, timeout=REQUEST_TIMEOUT)
        try:
            return await closed_loop(traffic, kinds, CONCURRENCY, seed)
        finally:
            await traffic.aclose()

    return Counter((outcome.kind, outcome.error) for outcome in asyncio.run(run()))


@pytest.fixture(scope="module")
def server(checkpoint_dirs):
    # A small output cache, full after the first round: it must stay at its bound, not grow.
    env = {"AUDIO_CACHE_MAX": str(AUDIO_CACHE_ENTRIES), "MAX_REQUEST_FRAMES": str(MAX_REQUEST_FRAMES)}
    with live_process("serve", checkpoint_dirs["base"], "--preload-model", env=env) as live:
        with live.client(timeout=60) as client:
            upload = {"audio_sample": ("reference.wav", reference_wav(3.0), "audio/wav")}
            voice = client.post("/v1/audio/voices", data={"name": "leak", "mode": "x_vector"}, files=upload)
        yield live, voice.json()["id"]


def test_mixed_traffic_leaves_nothing_behind(server):
    assert MAX_REQUEST_FRAMES * SAMPLES_PER_FRAME * PCM_BYTES_PER_SAMPLE > LEAVE_BY_BYTE, "leaving clients leave early"
    live, voice = server
    references = [reference_wav(2.0, 24000, pitch) for pitch in (110, 150, 190)]
    rng = random.Random(17)
    kinds = list(MIX) * 2 + [pick_kind(rng) for _ in range(REQUESTS_PER_ROUND - 2 * len(MIX))]
    # A first pass brings every lazily made thing into being (pool threads, caches' first entries, allocator arenas).
    warm = send_round(live, voice, references, kinds, seed=1)
    baseline = settled(live, state(live))
    first = send_round(live, voice, references, kinds, seed=2)
    after_first = settled(live, baseline)
    second = send_round(live, voice, references, kinds, seed=3)  # the same mix with fresh seeds: the same work
    after_second = settled(live, baseline)

    for outcomes in (warm, first, second):
        failed = {key: count for key, count in outcomes.items() if key[1] is not None}
        assert not failed, f"requests failed: {failed}"
        assert {kind for kind, _ in outcomes} == set(MIX)
    assert first == second
    for after in (after_first, after_second):
        assert after["engine"] == (0, 0, 0, 0), "rows, queued jobs and paused streams all freed"
        assert not after["engine_thread"], "the engine thread ended once idle"
        assert after["tasks"] == baseline["tasks"] and after["fds"] == baseline["fds"], (baseline, after)
        assert baseline["threads"] <= after["threads"] <= baseline["threads"] + POOL_THREADS, (baseline, after)
    caches = ("prompt_cache", "text_cache", "audio_cache")
    assert [after_second[c] for c in caches] == [after_first[c] for c in caches], "a like round adds nothing"
    assert after_second["audio_cache"] == AUDIO_CACHE_ENTRIES
    assert after_second["rss"] <= after_first["rss"] * (1 + RSS_GROWTH), (after_first["rss"], after_second["rss"])
