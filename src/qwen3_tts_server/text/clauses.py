"""Incremental clause splitting for text that arrives in pieces (an LLM's tokens).

A clause ends at . ! ? ; : , (optionally followed by closing quotes or brackets) once whitespace follows it,
or at CJK punctuation once any character follows it (CJK text has no spaces). Waiting for the next character
keeps "3." from splitting "3.14"; a minimum length keeps "Dr." or "1." from becoming tiny segments.
"""

from __future__ import annotations

import re
import unicodedata

MIN_CLAUSE_WIDTH = 12
_CLOSERS = "\"')\\]}»”’」』》）"
_BREAK = re.compile(rf"[.!?;:,]+[{_CLOSERS}]*(?=\s)|[。！？；：，、]+[{_CLOSERS}]*(?=.)", re.DOTALL)
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e"})


def width(text: str) -> int:
    """Length with wide (CJK) characters counting twice: each carries about a syllable of speech."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def _after_abbreviation(head: str, mark: str) -> bool:
    """A lone period after a title, an initial or "e.g." does not end a clause."""
    if mark.rstrip(_CLOSERS) != ".":
        return False
    word = (head.split() or [""])[-1].lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


class ClauseSplitter:
    """Feed text as it arrives and get back the clauses it completes; `flush` returns the rest."""

    def __init__(self, min_width: int = MIN_CLAUSE_WIDTH):
        self.min_width = min_width
        self.pending = ""

    def feed(self, text: str) -> list[str]:
        self.pending += text
        clauses = []
        while (end := self._first_break()) is not None:
            clauses.append(self.pending[:end].strip())
            self.pending = self.pending[end:]
        return clauses

    def flush(self) -> str:
        rest, self.pending = self.pending.strip(), ""
        return rest

    def _first_break(self) -> int | None:
        for match in _BREAK.finditer(self.pending):
            long_enough = width(self.pending[: match.end()].strip()) >= self.min_width
            if long_enough and not _after_abbreviation(self.pending[: match.start()], match.group()):
                return match.end()
        return None
