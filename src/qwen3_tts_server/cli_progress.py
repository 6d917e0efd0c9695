"""The bars the commands draw on stderr while they work (tqdm's, on a terminal only): `transcribe`'s and `eval`'s
transcription, `eval`'s sentences as they are spoken."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm

from .model.asr.transcriber import Progress


def bar(total: int | None, unit: str, desc: str, every: float = 0.1) -> tqdm:
    """A bar redrawn at most every `every` seconds (0: at each step)."""
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, leave=False, disable=None, mininterval=every)


@contextmanager
def transcription_progress() -> Iterator[Callable[[Progress], None]]:
    """The transcriber's `progress` callback for as long as it runs: the tokens it generated on a bar, its parts
    done beside them."""
    with bar(None, "token", "transcribing") as shown:

        def progress(state: Progress) -> None:
            shown.set_postfix_str(f"{state.parts_done}/{state.parts} parts", refresh=False)
            shown.update(state.tokens - shown.n)

        yield progress
