"""Cache settings: the clone prompts kept in memory, and the output cache of whole responses (in memory, or shared
through Redis between replicas)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .group import EMPTY_UNSETS, SettingsGroup


class CacheSettings(SettingsGroup):
    """What is kept to answer a repeat at once: clone prompts, and whole responses."""

    title = "Cache"

    voice_cache_max: int = Field(32, ge=0, description="clone prompts kept in memory")
    audio_cache_max: int = Field(256, ge=0, description="whole responses kept in the output cache; 0 disables it")
    audio_cache_max_bytes: int = Field(256 << 20, ge=1, description="bytes the in-memory output cache may hold")
    audio_cache_sampled: bool = Field(
        True, description="cache sampled requests without a seed too (a repeat replays the first audio)"
    )
    audio_cache_ttl: float = Field(86400.0, gt=0, description="seconds an output cache entry lives in Redis")
    redis_url: Annotated[str | None, EMPTY_UNSETS] = Field(
        None, description="share the output cache through Redis, e.g. redis://host:6379/0"
    )
