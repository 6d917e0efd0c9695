"""Synthesis settings: the default voice, text normalisation, the voice library, how streamed speech is cut into
chunks, and how much one segment or one WebSocket session may ask for."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field

from .group import EMPTY_UNSETS, SettingsGroup

# No segment runs past this many frames (80 ms each: 20 minutes); reaching it ends the segment with
# finish_reason "length", never silently.
MAX_REQUEST_FRAMES = 15000
DEFAULT_EMIT_FRAMES = 4  # the earlier server's STREAM_EMIT_FRAMES default, used when only STREAM_FIRST_EMIT is set


class SynthesisSettings(SettingsGroup):
    """What speech requests get by default, how streamed speech is cut, and how long speech may run."""

    title = "Synthesis"

    default_voice: str = Field(
        "vivian", min_length=1, description="the voice of a request that names none (the earlier server's default)"
    )
    text_normalize: bool = Field(True, description="read numbers, dates, symbols... as words unless a request says")
    data_dir: Annotated[Path | None, EMPTY_UNSETS] = Field(
        None, description="voice library (default ~/.local/share/qwen3-tts-server)"
    )
    stream_type: Literal["token", "sentence"] = Field(
        "token",
        description="how streamed audio is cut by default (a request's stream_mode overrides it): token, in chunks "
        "of frames as they are made (STREAM_FIRST_EMIT, then STREAM_EMIT_FRAMES); sentence, one chunk per text "
        "segment (a sentence or a few, at most 300 characters)",
    )
    stream_emit_frames: int | None = Field(
        None, ge=1, description="token streaming: frames per chunk (80 ms each; default: 1, 2, 4, then 8)"
    )
    stream_first_emit: int | None = Field(
        None, ge=0, description="token streaming: frames in the first chunk (0: as STREAM_EMIT_FRAMES)"
    )
    max_request_frames: int = Field(
        MAX_REQUEST_FRAMES,
        ge=1,
        validation_alias=AliasChoices("max_request_frames", "max_new_tokens"),
        description="frames (80 ms each) one segment may make; reaching it ends it as cut (also MAX_NEW_TOKENS)",
    )
    max_pending_text: int = Field(
        16384, ge=1, description="characters a WebSocket session may have waiting to be spoken; past it an error"
    )

    def token_chunks(self) -> tuple[int, ...] | None:
        """The token mode's chunk sizes in frames (the last repeats) from STREAM_FIRST_EMIT and STREAM_EMIT_FRAMES;
        None when neither is set: the engine's default schedule."""
        if self.stream_emit_frames is None and self.stream_first_emit is None:
            return None
        emit = self.stream_emit_frames or DEFAULT_EMIT_FRAMES
        return (self.stream_first_emit or emit, emit)
