"""Subtitles (SubRip and WebVTT) from a transcript and its word timestamps.

The aligner times words stripped of punctuation (`model/asr/word_split.py`); a cue shows the transcript's own text,
punctuation included, found by walking the transcript for each timed word in turn. A cue ends after a sentence's
end, at a pause, or before it would run past its rules' longest time or two lines (`CueRules`, the earlier ASR
server's SUBTITLE_* settings); a cue longer than a line is set on two, broken between words, or between characters
in Chinese and Japanese, which have no spaces. Short cues are held longer, never into the next one.

Without an aligner (`estimated_words`), each part's time is shared among its words by their length, as the
earlier server's fast mode did, but part by part rather than over the whole file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...model.asr.aligner import TimedWord, timed_by_length
from ...model.asr.word_split import is_kept
from .transcription import Transcript

SENTENCE_ENDS = ".!?。！？…"
CLAUSE_ENDS = ",;:，、；："
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")


@dataclass(frozen=True)
class CueRules:
    max_seconds: float = 7.0  # a cue's longest time on screen
    line_characters: int = 42  # a line's most characters; a cue has two lines at most
    pause_seconds: float = 0.5  # a longer silence between two words ends a cue
    min_seconds: float = 0.833  # a shorter cue is held this long, where the next one leaves room
    min_gap: float = 0.083  # the least time between two cues

    @property
    def max_characters(self) -> int:
        return 2 * self.line_characters


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str


def word_spans(text: str, words: Sequence[str]) -> list[tuple[int, int]] | None:
    """Where each word lies in `text` ([start, end) character offsets, the punctuation right after it included),
    in order; None if the words are not the text's (then cues fall back to the bare words)."""
    spans, position = [], 0
    for word in words:
        if not word:
            return None
        while position < len(text) and text[position] != word[0]:
            position += 1
        if position == len(text):
            return None
        start, matched = position, 0
        while position < len(text) and matched < len(word):
            if text[position] == word[matched]:
                matched += 1
            elif is_kept(text[position]):  # a kept character that is not the word's next: not this word
                return None
            position += 1
        if matched < len(word):
            return None
        while position < len(text) and not text[position].isspace() and not is_kept(text[position]):
            position += 1  # trailing punctuation belongs to the word before it
        spans.append((start, position))
    return spans


def subtitle_cues(
    text: str, words: Sequence[TimedWord], rules: CueRules = CueRules(), duration: float | None = None
) -> list[Cue]:
    """The cues of a transcript from its timed words (of a recording `duration` seconds long, if known); together
    they show the whole transcript."""
    spans = word_spans(text, [word.text for word in words])
    shown = [text[a:b] for a, b in spans] if spans is not None else [word.text for word in words]
    cues: list[Cue] = []
    first, cut = 0, 0  # the cue being built: words[first:index], from text[cut:]
    for index in range(1, len(words) + 1):
        if index < len(words):
            length = len(_joined(shown[first : index + 1]))
            too_long = words[index].end - words[first].start > rules.max_seconds or length > rules.max_characters
            pause = words[index].start - words[index - 1].end > rules.pause_seconds
            if not (too_long or pause or shown[index - 1].rstrip().endswith(tuple(SENTENCE_ENDS))):
                continue
        if spans is None:
            body = _joined(shown[first:index])
        else:
            end = spans[index - 1][1] if index < len(words) else len(text)
            body, cut = text[cut:end], end
        start, end_time = words[first].start, max(words[index - 1].end, words[first].start)
        cues.append(Cue(start, end_time, two_lines(" ".join(body.split()), rules.line_characters)))
        first = index
    return held_cues(cues, rules, duration)


def _joined(pieces: Sequence[str]) -> str:
    """Words as a line shows them: a space between two, none between two characters of Chinese or Japanese."""
    line = ""
    for piece in pieces:
        line += piece if not line or (CJK.match(line[-1]) and CJK.match(piece[0])) else " " + piece
    return line


def two_lines(text: str, limit: int) -> str:
    """A cue's text on one line, or on two broken where both fit and are most even (after a clause's end rather
    than anywhere else); where no break lets both fit, one line."""
    if len(text) <= limit:
        return text
    best: tuple[float, int, int] | None = None  # (score, end of the top line, start of the bottom line)
    for cut in range(1, len(text)):
        if text[cut] == " ":
            top, bottom = cut, cut + 1
        elif CJK.match(text[cut]) and (CJK.match(text[cut - 1]) or text[cut - 1] in CLAUSE_ENDS + SENTENCE_ENDS):
            top = bottom = cut  # between two characters of a language without spaces
        else:
            continue
        if top > limit or len(text) - bottom > limit:
            continue
        score = abs(top - (len(text) - bottom)) - (limit / 4 if text[top - 1] in CLAUSE_ENDS else 0)
        if best is None or score < best[0]:
            best = (score, top, bottom)
    return text if best is None else text[: best[1]].rstrip() + "\n" + text[best[2] :].lstrip()


def held_cues(cues: list[Cue], rules: CueRules, duration: float | None = None) -> list[Cue]:
    """Each cue held at least `min_seconds`, but ended `min_gap` before the next one starts and within the
    recording's `duration`; one still short starts earlier, where the cue before leaves room."""
    held: list[Cue] = []
    for index, cue in enumerate(cues):
        limit = cues[index + 1].start - rules.min_gap if index + 1 < len(cues) else duration
        end = cue.start + rules.min_seconds if limit is None else min(cue.start + rules.min_seconds, limit)
        end = max(end, cue.end)
        earliest = held[-1].end + rules.min_gap if held else 0.0
        start = max(min(cue.start, end - rules.min_seconds), min(earliest, cue.start))
        held.append(Cue(round(start, 3), round(end, 3), cue.text))
    return held


def estimated_words(text: str, start: float, end: float) -> list[TimedWord]:
    """Times for a part's words without an aligner: `start` to `end` shared by their characters (each character
    of Chinese or Japanese a word, the rest split at spaces)."""
    return timed_by_length([piece for chunk in text.split() for piece in _units(chunk)], start, end)


def length_timed_words(transcript: Transcript) -> list[TimedWord]:
    """Every part's words timed by `estimated_words`, in order."""
    return [word for part in transcript.segments for word in estimated_words(part.text, part.start, part.end)]


def _units(chunk: str) -> list[str]:
    """A spaceless run as words: each character of Chinese or Japanese one, punctuation with the word before it."""
    units: list[str] = []
    for character in chunk:
        if not units or CJK.match(character) or (CJK.match(units[-1][-1]) and is_kept(character)):
            units.append(character)
        else:
            units[-1] += character
    return units


def _clock(seconds: float, decimal: str) -> str:
    milliseconds = max(0, round(seconds * 1000))
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{decimal}{rest % 1000:03d}"


def to_srt(cues: Sequence[Cue]) -> str:
    return "".join(
        f"{number}\n{_clock(cue.start, ',')} --> {_clock(cue.end, ',')}\n{cue.text}\n\n"
        for number, cue in enumerate(cues, start=1)
    )


def to_webvtt(cues: Sequence[Cue]) -> str:
    body = "".join(f"{_clock(cue.start, '.')} --> {_clock(cue.end, '.')}\n{cue.text}\n\n" for cue in cues)
    return "WEBVTT\n\n" + body
