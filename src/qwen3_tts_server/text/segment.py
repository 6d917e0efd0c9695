"""Sentences and speech segments: whole text (`split_sentences`, `speech_segments`) and text arriving in pieces
(`IncrementalSegmenter`).

One rule-based judge decides every break: a mark run (. ! ? … , ; : — or their CJK forms 。！？、，；：) with any
closing quotes or brackets, then whitespace for a Latin mark (so 3.14 and 1,234.5 never split) or anything for a
CJK mark. A period after a title, an initial or a German ordinal ("Dr.", "z.B.", "J.", "am 3. Mai") never ends a
sentence; after an ambiguous abbreviation ("etc.", "p.m.", "U.S.A."), an ellipsis or a closing quote it does
unless the next word starts in lower case or with a digit. A line break ends a sentence.

Where pysbd has the language, sentences are its ends, repaired (see `_repair`), plus the rules' ends that the
next word bears out: pysbd takes some plain words for abbreviations.

Every cut falls next to whitespace or a CJK character, so segments carry the text's words, in order, and
nothing else; only a run longer than max_chars with neither is cut inside, between two characters as a reader
sees them where it can (never between a letter and its combining marks, nor inside an emoji sequence).
"""

from __future__ import annotations

import re
import unicodedata
from enum import Enum
from functools import cache

import pysbd

from .language import LANGUAGE_CODES
from .scripts import is_cjk

# pysbd has no Korean or Portuguese rules: those are split by the rules alone.
PYSBD_CODES = {name: code for name, code in LANGUAGE_CODES.items() if name not in ("korean", "portuguese")}
# pysbd's time grows faster than the text (7 ms for 900 characters, 170 ms for 7000): it gets chunks of whole
# rule-based sentences about this long, and a longer sentence is left to the rules.
PYSBD_CHUNK = 500

_CLOSERS = "\"')]}»›”’」』》）〉】〕"
_OPENERS = "\"'([{«‹“‘「『《（〈【〔¿¡"
_LATIN_ENDS = ".!?…"
_CJK_ENDS = "。！？｡"
_CJK_CLAUSES = "、，；：﹐"
_MARK = re.compile(rf"\n|(?:[.!?…]+|[。！？｡]+|[,;:—–]|[、，；：﹐]+)[{re.escape(_CLOSERS)}]*")
_SPEAKABLE = re.compile(r"[^\W_]")  # a letter or a digit
_ZWJ = "\u200d"
# What extends the character before it besides combining marks and variation selectors: emoji skin-tone
# modifiers and the tag characters of subdivision flags.
_EXTENDERS = re.compile("[\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")
_VISIBLE = re.compile(r"\S")
_NEXT_WORD = re.compile(rf"[\s{re.escape(_OPENERS)}]*(\S)")

# Titles and abbreviations that stay inside a sentence, and abbreviations that may end one. English applies to
# every language (English words turn up everywhere); no language means all of them.
_TITLES = {
    "english": "mr mrs ms dr prof st rev gen col capt lt sgt gov sen rep mt ft ave blvd dept univ vs e.g i.e cf approx",
    "german": "z.b bzw d.h u.a vgl ggf evtl nr hr fr ca inkl sog s.o z.t",
    "french": "mme mlle pr p.ex",
    "spanish": "sr sra srta sres dña ud uds avda dpto excmo excma gral lic lcdo p.ej núm pág aprox",
    "italian": "sig sig.ra sigg dott dott.ssa ing avv p.es pag",
    "portuguese": "sr sra srta dra profa exmo exma v.exa p.ex pág aprox",
    "russian": "т.е т.к т.н напр ул им см стр г",
}
_AMBIGUOUS = {
    "english": "etc inc ltd co corp jr sr no fig vol ch sec p pp jan feb mar apr jun jul aug sep sept oct nov dec",
    "german": "usw str abs",
    "italian": "ecc",
    "russian": "т.д т.п",
}


def speakable(text: str) -> bool:
    """Whether `text` has a letter or a digit: something to say, not only punctuation, symbols, emoji or marks."""
    return _SPEAKABLE.search(text) is not None


class _Break(Enum):
    NONE = "none"
    CLAUSE = "clause"
    SENTENCE = "sentence"


def _clean(text: str, cut: int) -> bool:
    """A cut here splits no word: whitespace or a CJK character on one side."""
    if cut <= 0 or cut >= len(text):
        return True
    left, right = text[cut - 1], text[cut]
    return left.isspace() or right.isspace() or is_cjk(left) or is_cjk(right)


def _splits_character(text: str, cut: int) -> bool:
    """A cut here parts a character from what extends it: its combining marks, a variation selector, an emoji
    modifier or tag, or a zero-width joiner and the characters it joins."""
    right = text[cut]
    extends = unicodedata.category(right).startswith("M") or _EXTENDERS.match(right) is not None
    return extends or _ZWJ in (right, text[cut - 1])


def _last_word(text: str, start: int, end: int) -> str:
    """The whitespace-separated word that ends at `end`, without opening quotes or brackets."""
    words = text[max(start, end - 40) : end].split()
    return words[-1].lstrip(_OPENERS) if words else ""


def _next_visible(text: str, start: int) -> str | None:
    """The first character from `start` on that is not whitespace."""
    match = _VISIBLE.search(text, start)
    return match.group() if match else None


class _Rules:
    """Break decisions for one language (its abbreviations)."""

    def __init__(self, language: str | None):
        names = [language] if language else list(_TITLES)
        self.titles = frozenset(word for name in {"english", *names} for word in _TITLES.get(name, "").split())
        self.ambiguous = frozenset(word for name in {"english", *names} for word in _AMBIGUOUS.get(name, "").split())
        self.ordinals = "german" in names

    def never_ends(self, word: str) -> bool:
        """A period after this word (without its period) is not a sentence end: a title, an initial, or in German
        an ordinal ("am 3. Mai", and German nouns start in upper case)."""
        initial = len(word) == 1 and word.isupper() and word != "I"
        return word.lower() in self.titles or initial or (self.ordinals and word.isdigit())

    def judge(self, text: str, mark: re.Match, start: int, final: bool) -> _Break | None:
        """The break `mark` makes in the segment that starts at `start`; None while the text after it is unknown.
        `final`: nothing follows the text."""
        if not _SPEAKABLE.search(text, start, mark.start()):
            return _Break.NONE
        if mark.group() == "\n":
            return _Break.SENTENCE
        marks = mark.group().rstrip(_CLOSERS)
        kind = _Break.SENTENCE if marks[-1] in _LATIN_ENDS + _CJK_ENDS else _Break.CLAUSE
        end = mark.end()
        if end == len(text):
            return kind if final else None
        if marks[-1] in _CJK_ENDS + _CJK_CLAUSES:
            # 「行こう。」と言った: a closing quote right before a letter keeps the sentence going.
            closed = len(marks) < len(mark.group())
            return _Break.NONE if closed and (text[end].isalnum() or not _clean(text, end)) else kind
        if not text[end].isspace():
            return _Break.NONE
        if kind is _Break.CLAUSE:
            return kind
        return self._sentence_end(text, mark, start, final)

    def _sentence_end(self, text: str, mark: re.Match, start: int, final: bool) -> _Break | None:
        """A Latin sentence mark followed by whitespace."""
        marks = mark.group().rstrip(_CLOSERS)
        word = _last_word(text, start, mark.start())
        if marks == "." and (self.never_ends(word) or _list_number(text, start, mark.start(), word)):
            return _Break.NONE
        abbreviation = marks == "." and (word.lower() in self.ambiguous or "." in word)
        if abbreviation or ".." in marks or "…" in marks or len(marks) < len(mark.group()):
            following = _next_visible(text, mark.end())
            if following is None:
                return _Break.SENTENCE if final else None
            if following.islower() or following.isdigit():
                return _Break.NONE
        return _Break.SENTENCE


def _list_number(text: str, start: int, end: int, word: str) -> bool:
    """A number opening a segment ("1.") numbers a list item."""
    return word.isdigit() and text[start:end].strip() == word


@cache
def _rules(language: str | None) -> _Rules:
    return _Rules(language)


def _language(language: str | None) -> str | None:
    """The language's name in lower case, or None for no language or one the model lacks."""
    name = (language or "").lower()
    return name if name in LANGUAGE_CODES else None


# -- whole text ----------------------------------------------------------------------------------------------


def _rule_cuts(text: str, rules: _Rules, start: int = 0, stop: int | None = None) -> list[int]:
    """Sentence ends in text[start:stop] by the rules alone."""
    cuts = []
    for mark in _MARK.finditer(text, start, len(text) if stop is None else stop):
        if rules.judge(text, mark, start, final=True) is _Break.SENTENCE:
            cuts.append(start := mark.end())
    return cuts


def _chunks(text: str, cuts: list[int]) -> list[tuple[int, int]]:
    """Consecutive sentences packed into spans of at most PYSBD_CHUNK characters (a longer sentence alone)."""
    spans: list[tuple[int, int]] = []
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        if spans and end - spans[-1][0] <= PYSBD_CHUNK:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _align(text: str, start: int, stop: int, sentences: list[str]) -> list[int] | None:
    """Where pysbd's sentences end in text[start:stop], matched on their non-space characters (pysbd moves
    whitespace, and now and then drops a trailing run); None when the characters differ."""
    cuts, pos = [], start
    for sentence in sentences:
        for char in sentence:
            if char.isspace():
                continue
            while pos < stop and text[pos].isspace():
                pos += 1
            if pos == stop or text[pos] != char:
                return None
            pos += 1
        cuts.append(pos)
    return cuts[:-1]


def _repair(text: str, cut: int, rules: _Rules) -> int | None:
    """A pysbd cut moved past the closing quotes it left behind (”然后), or None where it splits a word or
    follows a title (pysbd splits "Sr. García" and "т.е. тест")."""
    while not text[cut - 1].isspace() and cut < len(text) and text[cut] in _CLOSERS:
        cut += 1
    before = text[max(0, cut - 40) : cut].rstrip()
    if not _clean(text, cut) or (before.endswith(".") and rules.never_ends(_last_word(before, 0, len(before) - 1))):
        return None
    return cut


def _confident(text: str, cut: int) -> bool:
    """A rule-based sentence end that the next word bears out: it starts neither in lower case nor with a digit."""
    following = _NEXT_WORD.match(text, cut)
    return following is None or not (following.group(1).islower() or following.group(1).isdigit())


def _pysbd_cuts(text: str, code: str, rules: _Rules) -> list[int]:
    """pysbd's sentence ends, and the rules' confident ones: pysbd misses plain ends after words on its
    abbreviation lists ("Estamos bien. Gracias.": "bien" is a Spanish abbreviation to pysbd)."""
    confident = [cut for cut in _rule_cuts(text, rules) if _confident(text, cut)]
    cuts = list(confident)
    for start, stop in _chunks(text, confident):
        found = None
        if stop - start <= PYSBD_CHUNK:
            found = _align(text, start, stop, pysbd.Segmenter(language=code, clean=False).segment(text[start:stop]))
        if found is None:
            cuts += _rule_cuts(text, rules, start, stop)
        else:
            cuts += [cut for cut in (_repair(text, cut, rules) for cut in found) if cut is not None]
    return sorted(set(cuts))


def _spans(text: str, cuts: list[int]) -> list[tuple[int, int]]:
    """The pieces between cuts that say something; a piece with no letter or digit joins its neighbour."""
    spans: list[tuple[int, int]] = []
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        if not text[start:end].strip():
            continue
        if spans and not (_SPEAKABLE.search(text, start, end) and _SPEAKABLE.search(text, *spans[-1])):
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _sentence_spans(text: str, language: str | None) -> list[tuple[int, int]]:
    language = _language(language)
    rules = _rules(language)
    code = PYSBD_CODES.get(language or "")
    return _spans(text, _pysbd_cuts(text, code, rules) if code else _rule_cuts(text, rules))


def split_sentences(text: str, language: str | None) -> list[str]:
    """Sentences, in order, whitespace-trimmed, joining back to the text's content. pysbd where it has the
    language, a rule-based splitter for korean, portuguese and None/unknown."""
    return [text[start:end].strip() for start, end in _sentence_spans(text, language)]


def _cut(text: str, start: int, max_chars: int) -> int:
    """Where a piece that starts at `start` (not whitespace) and runs past max_chars ends: the last whitespace
    that keeps it within max_chars, else the last point beside a CJK character (best not before a mark), else
    the last point between two characters as a reader sees them, else max_chars in."""
    limit = start + max_chars
    preferences = (
        lambda cut: text[cut].isspace(),
        lambda cut: _clean(text, cut) and text[cut] not in _CLOSERS + _CJK_ENDS + _CJK_CLAUSES,
        lambda cut: _clean(text, cut),
        lambda cut: not _splits_character(text, cut),
    )
    return next((cut for good in preferences for cut in range(limit, start, -1) if good(cut)), limit)


def _word_pieces(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """text[start:end] in pieces of at most max_chars, cut at word boundaries."""
    pieces = []
    while text[start:end].strip():
        while text[start].isspace():
            start += 1
        if len(text[start:end].rstrip()) <= max_chars:
            return [*pieces, (start, end)]
        cut = _cut(text, start, max_chars)
        pieces.append((start, cut))
        start = cut
    return pieces


def _fitted(text: str, start: int, end: int, rules: _Rules, max_chars: int) -> list[tuple[int, int]]:
    """A sentence in pieces of at most max_chars: whole, else at clause marks, else at word boundaries."""
    if len(text[start:end].strip()) <= max_chars:
        return [(start, end)]
    cuts = []
    for mark in _MARK.finditer(text, start, end):
        if rules.judge(text, mark, cuts[-1] if cuts else start, final=True) is not _Break.NONE:
            cuts.append(mark.end())
    bounds = zip([start, *cuts], [*cuts, end], strict=True)
    return [piece for a, b in bounds for piece in _word_pieces(text, a, b, max_chars)]


def _packed(text: str, pieces: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Neighbouring pieces joined while the result stays within max_chars."""
    spans: list[tuple[int, int]] = []
    for start, end in pieces:
        if spans and len(text[spans[-1][0] : end].strip()) <= max_chars:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def speech_segments(text: str, language: str | None, max_chars: int = 300) -> list[str]:
    """Segments for synthesis of long text: whole sentences, short neighbours merged up to about max_chars,
    a longer sentence split at clause boundaries (, ; : — and CJK 、，；：), and a run with no boundary at all
    split at word boundaries (CJK: between characters) so that no segment exceeds max_chars. Nothing lost:
    the segments' words, in order, are the text's words."""
    rules = _rules(_language(language))
    pieces = [piece for a, b in _sentence_spans(text, language) for piece in _fitted(text, a, b, rules, max_chars)]
    segments = (text[a:b].strip() for a, b in _packed(text, pieces, max_chars))
    return [segment for segment in segments if segment]


# -- text in pieces ------------------------------------------------------------------------------------------


class IncrementalSegmenter:
    """Text arriving in pieces (an LLM's tokens). feed(piece) returns the segments it completes: a segment is
    released at a sentence end, or at a clause boundary once it holds at least `min_chars` (so the first
    audio does not wait for a whole paragraph); flush() returns the rest. Feeding a text token by token
    yields the same segments as feeding it whole then flushing."""

    def __init__(self, language: str | None = None, min_chars: int = 12, max_chars: int = 300):
        self.rules = _rules(_language(language))
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.pending = ""

    def feed(self, text: str) -> list[str]:
        self.pending += text
        segments = []
        while (end := self._release()) is not None:
            segments.append(self.pending[:end].strip())
            self.pending = self.pending[end:]
        return segments

    def flush(self) -> str:
        rest, self.pending = self.pending.strip(), ""
        return rest

    def _release(self) -> int | None:
        """The end of the segment at the head of the pending text, once the text after it settles it. Every
        decision looks at a bounded stretch of text, so it is the same however the text was cut into pieces."""
        text = self.pending = self.pending.lstrip()
        for mark in _MARK.finditer(text):
            if mark.end() > self.max_chars:
                break
            verdict = self.rules.judge(text, mark, 0, final=False)
            if verdict is None:
                return None
            if verdict is _Break.SENTENCE or (verdict is _Break.CLAUSE and len(text[: mark.end()]) >= self.min_chars):
                return mark.end()
        return _cut(text, 0, self.max_chars) if len(text.rstrip()) > self.max_chars else None
