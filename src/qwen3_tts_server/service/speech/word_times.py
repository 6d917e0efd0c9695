"""Word times of synthesised speech in the client's words. The aligner times the words of the text as spoken (after
normalisation: "$5" spoken as "five dollars"); the client's words are matched to them in order (difflib), a run
of the client's words that was spoken differently shares its spoken run's time by length, and a word that was not
spoken at all (an emoji, a mark) takes no time where it stands. Every word the client sent is kept once, in order,
each start <= end, and the times never decrease.

`character_times` spreads a segment's word times over the characters of the client's text, as ElevenLabs' alignment
gives them (`chars`, start and duration of each); `written_words` gathers them into the client's words as written,
marks included, as Cartesia's word timestamps give them."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from ...model.asr.aligner import TimedWord, timed_by_length


@dataclass(frozen=True)
class CharacterTimes:
    chars: list[str]
    starts_ms: list[int]
    durations_ms: list[int]


def client_word_times(client: Sequence[str], spoken: Sequence[TimedWord]) -> list[TimedWord]:
    """The client's words (as the aligner splits the text the client sent) timed by the spoken words' times."""
    matcher = difflib.SequenceMatcher(
        a=[word.lower() for word in client], b=[word.text.lower() for word in spoken], autojunk=False
    )
    timed: list[TimedWord] = []
    for tag, first, last, spoken_first, spoken_last in matcher.get_opcodes():
        words = client[first:last]
        if tag == "equal":
            timed += [
                TimedWord(word, s.start, s.end) for word, s in zip(words, spoken[spoken_first:spoken_last], strict=True)
            ]
        elif tag == "replace":
            timed += timed_by_length(words, spoken[spoken_first].start, spoken[spoken_last - 1].end)
        elif tag == "delete":  # not spoken: no time, where it stands
            at = timed[-1].end if timed else (spoken[spoken_first].start if spoken_first < len(spoken) else 0.0)
            timed += [TimedWord(word, at, at) for word in words]
        # "insert": spoken words the client did not write (a normaliser's expansion beside equal words) are skipped
    return timed


def clamped(words: Sequence[TimedWord], duration: float, offset: float, speed: float = 1.0) -> list[TimedWord]:
    """Times inside a segment of `duration` seconds of model audio, sped up by `speed`, then moved `offset`
    seconds on (the aligner can put the last words past the audio's end)."""

    def moved(seconds: float) -> float:
        return round(offset + min(max(seconds, 0.0), duration) / speed, 3)

    return [TimedWord(word.text, moved(word.start), moved(word.end)) for word in words]


def character_times(text: str, words: Sequence[TimedWord], start: float, end: float) -> CharacterTimes:
    """Every character of `text` (a segment the client sent, spoken from `start` to `end` seconds) with a start and
    a duration in milliseconds: a word's characters share its time; the characters between words (spaces, marks)
    take none, at the end of the word before them (the segment's start before the first word), and those after
    the last word run to the segment's end so that a client sees the whole segment played."""
    starts = [start] * len(text)
    ends = [start] * len(text)
    cursor, at = 0, start
    for word in words:
        positions = _positions(text, word.text, cursor)
        if not positions:
            continue
        for index in range(cursor, positions[0]):  # the gap before the word
            starts[index] = ends[index] = at
        step = (word.end - word.start) / len(positions)
        for k, index in enumerate(positions):
            starts[index], ends[index] = word.start + k * step, word.start + (k + 1) * step
        for index in range(positions[0], positions[-1] + 1):  # marks inside the word (an apostrophe's neighbours)
            if index not in positions:
                starts[index] = ends[index] = starts[index - 1]
        cursor, at = positions[-1] + 1, word.end
    for index in range(cursor, len(text)):
        starts[index], ends[index] = at, at
    if text:
        ends[-1] = max(ends[-1], end)
    starts_ms = [round(1000 * second) for second in starts]
    return CharacterTimes(
        list(text), starts_ms, [max(0, round(1000 * e) - s) for e, s in zip(ends, starts_ms, strict=True)]
    )


def written_words(text: str, words: Sequence[TimedWord], start: float) -> list[TimedWord]:
    """`text` (a segment the client sent, spoken from `start`) cut into its words as written: each run between
    spaces with its marks ("friend.", "$5"), cut again where a second timed word begins inside one (Chinese, written
    without spaces, comes a character a word, its marks with the character before them). Each takes the span of the
    timed words in it; one with none (an emoji, a dash) takes no time, at the end of the word before it."""
    firsts: dict[int, TimedWord] = {}  # the timed words found in the text, by where each begins
    cursor = 0
    for word in words:
        if positions := _positions(text, word.text, cursor):
            firsts[positions[0]], cursor = word, positions[-1] + 1
    spans: list[list[int]] = []  # each written word's [begin, end) in the text
    for index, character in enumerate(text):
        if character.isspace():
            continue
        after_space = index == 0 or text[index - 1].isspace()
        if after_space or index in firsts and any(p in firsts for p in range(spans[-1][0], index)):
            spans.append([index, index + 1])
        else:
            spans[-1][1] = index + 1
    timed, at = [], start
    for begin, end in spans:
        inside = [firsts[p] for p in range(begin, end) if p in firsts]
        if inside:
            at = inside[-1].end
        timed.append(TimedWord(text[begin:end], inside[0].start if inside else at, at))
    return timed


def _positions(text: str, word: str, cursor: int) -> list[int]:
    """Where `word`'s characters stand in `text` from `cursor` on, in order (the aligner's words drop marks, so
    a word's characters may be apart: "don't" is found in "don't", "5" in "$5"); empty if they are not there."""
    positions = []
    for character in word:
        found = text.find(character, cursor)
        if found < 0:
            return []
        positions.append(found)
        cursor = found + 1
    return positions
