"""Subtitles (SubRip and WebVTT) from a transcript and its word timestamps.

The aligner times words stripped of punctuation (`model/asr/word_split.py`); a cue shows the transcript's own text,
punctuation included, found by walking the transcript for each timed word in turn. A cue ends after a sentence's
end, or before it would run past `MAX_CUE_SECONDS` or `MAX_CUE_CHARACTERS`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model.asr.transcriber import TimedWord
from ..model.asr.word_split import is_kept

MAX_CUE_SECONDS = 6.0
MAX_CUE_CHARACTERS = 84  # two lines of 42, the common broadcast limit
SENTENCE_ENDS = ".!?。！？…"


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


def subtitle_cues(text: str, words: Sequence[TimedWord]) -> list[Cue]:
    """The cues of a transcript from its timed words; together they show the whole transcript."""
    spans = word_spans(text, [word.text for word in words])
    shown = [text[a:b] for a, b in spans] if spans is not None else [word.text for word in words]
    cues: list[Cue] = []
    first, cut = 0, 0  # the cue being built: words[first:index], from text[cut:]
    for index in range(1, len(words) + 1):
        if index < len(words):
            length = sum(len(piece) + 1 for piece in shown[first : index + 1])
            too_long = words[index].end - words[first].start > MAX_CUE_SECONDS or length > MAX_CUE_CHARACTERS
            if not (too_long or shown[index - 1].rstrip().endswith(tuple(SENTENCE_ENDS))):
                continue
        if spans is None:
            body = " ".join(shown[first:index])
        else:
            end = spans[index - 1][1] if index < len(words) else len(text)
            body, cut = text[cut:end], end
        cues.append(Cue(words[first].start, max(words[index - 1].end, words[first].start), " ".join(body.split())))
        first = index
    return cues


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
