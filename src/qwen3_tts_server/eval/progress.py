"""The bars an evaluation draws on stderr while it speaks or transcribes (tqdm's, on a terminal only, as the
`transcribe` command's): a configuration's 400 sentences take many minutes on a CPU."""

from __future__ import annotations

import sys
from collections.abc import Callable

from tqdm import tqdm

from ..model.asr.transcriber import Progress


def bar(total: int, unit: str, desc: str, every: float = 0.1) -> tqdm:
    """A bar redrawn at most every `every` seconds (0: at each step)."""
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, leave=False, disable=None, mininterval=every)


def transcription_bar(shown: tqdm) -> Callable[[Progress], None]:
    """The transcriber's progress (its parts done, the tokens it generated) on a bar counted in parts."""

    def progress(state: Progress) -> None:
        shown.total = state.parts
        shown.set_postfix_str(f"{state.tokens} tokens", refresh=False)
        shown.update(state.parts_done - shown.n)

    return progress
