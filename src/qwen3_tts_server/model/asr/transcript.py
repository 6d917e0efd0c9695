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
