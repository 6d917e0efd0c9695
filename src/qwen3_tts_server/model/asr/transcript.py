"""From the decoded output of Qwen3-ASR to (language, text), as the official package reads it
(docs/asr_reference.md, section i): runs the model repeated are collapsed first, then `language X<asr_text>` is
read off the front. The collapsing is part of the official output, so it is reproduced as it is, quirks included:
it looks at the whole output, language prefix and all, and a unit repeated exactly `threshold` times collapses too.
"""

from __future__ import annotations

import itertools

ASR_TEXT = "<asr_text>"
LANGUAGE_PREFIX = "language "
REPEAT_THRESHOLD = 20  # repeats of a character or a unit that mark a decoding loop
LONGEST_UNIT = 20  # characters in the longest repeated unit looked for


def canonical_language(name: str) -> str:
    """A language name as the model writes it: first letter upper case, the rest lower ("cHINese" -> "Chinese")."""
    name = name.strip()
    return name[:1].upper() + name[1:].lower()


def _collapse_character_runs(text: str, threshold: int) -> str:
    """A character repeated more than `threshold` times in a row, once."""
    return "".join(
        character if len(run) > threshold else run
        for character, group in itertools.groupby(text)
        for run in ["".join(group)]
    )


def _collapse_unit_runs(text: str, threshold: int, longest: int) -> str:
    """From the left, the first place where a unit of 1 to `longest` characters (the shortest first) repeats at least
    `threshold` times in a row: the unit once, and the rest of the text treated the same way."""
    length = len(text)
    for start in range(length - 2 * threshold + 1):
        for size in range(1, longest + 1):
            end = start + size * threshold
            if end > length:
                break
            unit = text[start : start + size]
            if text[start:end] == unit * threshold:
                while text[end : end + size] == unit and end + size <= length:
                    end += size
                return text[:start] + unit + _collapse_unit_runs(text[end:], threshold, longest)
    return text


def collapse_repetitions(text: str, threshold: int = REPEAT_THRESHOLD) -> str:
    return _collapse_unit_runs(_collapse_character_runs(text, threshold), threshold, LONGEST_UNIT)


class SettledCollapse:
    """The collapse of an output as it is decoded: `settled` is the longest start of the whole output's collapse
    (`collapse_repetitions` of it stripped) that no continuation can change, so text shown from it is never taken
    back. Held back: the current run of one character, a tail that repeats a unit of up to `LONGEST_UNIT`
    characters (past its first unit: more repeats would collapse), and a run already `threshold` units long that
    the official scan does not reach until 40 more characters come (it would collapse then, and stays if the output
    ends first). Ordinary text settles as it comes."""

    def __init__(self, threshold: int = REPEAT_THRESHOLD, longest: int = LONGEST_UNIT):
        self.threshold, self.longest = threshold, longest
        self._blank = ""  # whitespace after the last other character: stripped if the output ends there
        self._started = False  # a character other than whitespace came (what is before it is stripped)
        self._runs = ""  # the character collapse of the runs done, from where the unit scan is
        self._run, self._count = "", 0  # the run under way: its character and length
        self._out = ""  # the unit collapse, as far as it is decided
        self._pos = 0  # where the unit scan goes on in the character-collapsed text
        self._unit, self._end = "", 0  # a collapsing run that may go on: its unit and its end so far

    def feed(self, piece: str) -> None:
        for character in piece:
            if character.isspace():
                self._blank += character if self._started else ""
                continue
            self._started = True
            for each in self._blank + character:
                if each == self._run:
                    self._count += 1
                    continue
                if self._run:
                    self._runs += self._run if self._count > self.threshold else self._run * self._count
                self._run, self._count = each, 1
            self._blank = ""

    @property
    def settled(self) -> str:
        text = self._runs + self._run  # a prefix of every continuation's character collapse (from the scan's place)
        self._advance(text)
        done = min(self._end if self._unit else self._pos, len(self._runs))  # the scan has passed it: only `_out`
        self._runs, text = self._runs[done:], text[done:]
        self._pos, self._end = self._pos - done, self._end - done
        if self._unit:
            return self._out
        end = len(text)
        for start in range(self._pos, len(text)):
            if start + 1 >= end:
                break
            size = self._possible_unit(text, start, end - start - 1)
            if size:
                end = start + size
        return self._out + text[self._pos : end]

    def _advance(self, text: str) -> None:
        """The unit scan (`_collapse_unit_runs`) over `text` as far as its continuation cannot change it."""
        while True:
            if self._unit:
                size = len(self._unit)
                while text[self._end : self._end + size] == self._unit:
                    self._end += size
                rest = text[self._end :]
                if len(rest) < size and self._unit.startswith(rest):
                    return  # the run may go on
                self._unit, self._pos = "", self._end
            start = self._pos
            if start >= len(text):
                return
            size = self._possible_unit(text, start)
            if not size:
                self._out += text[start]
                self._pos += 1
            elif start + size * self.threshold <= len(text) and start <= len(text) - 2 * self.threshold:
                self._unit, self._end = text[start : start + size], start + size * self.threshold
                self._out += self._unit
            else:
                return  # a repeat that may yet come, or that the scan does not reach yet

    def _possible_unit(self, text: str, start: int, longest: int | None = None) -> int:
        """The shortest unit (of at most `longest` characters) that repeats `threshold` times from `start`, or may
        once more text comes (the text after `start` repeats it so far); 0 for none."""
        for size in range(1, min(longest or self.longest, self.longest) + 1):
            if start + size < len(text) and text[start + size] != text[start]:
                continue  # the common case, at once
            window = text[start : start + size * self.threshold]
            if window[size:] == window[: max(0, len(window) - size)]:
                return size
        return 0


def parse_transcript(decoded: str, forced_language: str | None = None) -> tuple[str, str]:
    """(language, text) of one decoded output. With a forced language the output is all text. Without one, the
    language is the first `language X` line before `<asr_text>` ("" when none, or for `language None`, the model's
    word for no speech); an output without the tag is all text, of no known language."""
    text = collapse_repetitions(decoded.strip()) if decoded.strip() else ""
    if not text:
        return "", ""
    if forced_language:
        return forced_language, text
    if ASR_TEXT not in text:
        return "", text.strip()
    header, body = text.split(ASR_TEXT, 1)
    if "language none" in header.lower():
        return "", body.strip()
    for line in header.splitlines():
        line = line.strip()
        if line.lower().startswith(LANGUAGE_PREFIX):
            value = line[len(LANGUAGE_PREFIX) :].strip()
            return (canonical_language(value) if value else ""), body.strip()
    return "", body.strip()


def merge_languages(languages: list[str]) -> str:
    """The languages of a long audio's parts, in order, each run of one language once, unknown ones left out
    ("Chinese,English")."""
    named = [language.strip() for language in languages if language and language.strip()]
    return ",".join(language for language, _ in itertools.groupby(named))


def joined_parts(parsed: list[tuple[str, str]]) -> tuple[str, str]:
    """A recording's (language, text) from its parts' (language, text) in order."""
    return merge_languages([language for language, _ in parsed]), "".join(text for _, text in parsed)
