"""The sentences `qwen3-tts-server eval speech` synthesises and scores (eval/sentences.json, shipped in the package):
a versioned set of 30-50 sentences in each of the model's ten languages, ids numbered in order, texts unique and
on one line, short and long ones and numbers in every language, each text in its language's script, and none that
the project's own language detector takes for another language."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from typing import Any

import pytest

from qwen3_tts_server.text.language import LANGUAGE_NAMES, detect_language
from qwen3_tts_server.text.scripts import HAN_RANGES, HANGUL_RANGES, KANA_RANGES

CODES = sorted(LANGUAGE_NAMES)
CJK = {"zh", "ja", "ko"}
UNSPACED = {"zh", "ja"}
MAX_CHARACTERS = 300
MIN_WITH_DIGITS = 6
# (short below, long above) in words; for Chinese and Japanese, written without spaces, in letters and digits.
# Latin and Cyrillic: short 3-8 words, long 21-40. A Korean word (eojeol) carries its particles and endings, about
# one and a half English words: short up to 5, long from 14. A Han character or kana is about a syllable: short
# under 15, long over 40.
LENGTH_BOUNDS = {"zh": (15, 40), "ja": (15, 40), "ko": (6, 13)}
WORD_BOUNDS = (9, 20)
MIN_DETECTED_WORDS = 8  # the detector is asked about Latin and Cyrillic text of this many words, CJK text always
MIN_CYRILLIC_SHARE = 0.9  # the rest: units ("°C") and the like

HAN = re.compile(f"[{HAN_RANGES}]")
KANA = re.compile(f"[{KANA_RANGES}]")
HANGUL = re.compile(f"[{HANGUL_RANGES}]")
CYRILLIC = re.compile("[\u0400-\u052f]")


@cache
def sentence_set() -> dict[str, Any]:
    """eval/sentences.json, read from the package as the eval command reads it."""
    return json.loads((files("qwen3_tts_server") / "eval" / "sentences.json").read_text(encoding="utf-8"))


def sentences(code: str) -> list[dict[str, str]]:
    return sentence_set()["languages"][code]


def texts(code: str) -> list[str]:
    return [sentence["text"] for sentence in sentences(code)]


def word_count(text: str) -> int:
    """Space-separated words, a lone punctuation mark ("?" in French, "—") not counted."""
    return sum(any(char.isalnum() for char in word) for word in text.split())


def length(code: str, text: str) -> int:
    return sum(char.isalnum() for char in text) if code in UNSPACED else word_count(text)


def test_version_and_languages() -> None:
    data = sentence_set()
    assert set(data) == {"version", "languages"}
    version = data["version"]
    assert isinstance(version, int) and not isinstance(version, bool) and version > 0
    languages = data["languages"]
    assert isinstance(languages, dict) and languages.keys() == LANGUAGE_NAMES.keys()


@pytest.mark.parametrize("code", CODES)
def test_ids_numbered_in_order(code: str) -> None:
    found = sentences(code)
    assert 30 <= len(found) <= 50
    assert all(set(sentence) == {"id", "text"} for sentence in found)
    assert [sentence["id"] for sentence in found] == [f"{code}-{number:02d}" for number in range(1, len(found) + 1)]


def test_texts_unique_and_on_one_line() -> None:
    every = [text for code in CODES for text in texts(code)]
    assert len(set(every)) == len(every)
    for text in every:
        assert isinstance(text, str)
        assert text and text == text.strip() and len(text) <= MAX_CHARACTERS, text
        assert not any(char in text for char in "\n\r\u2028\u2029"), text


@pytest.mark.parametrize("code", CODES)
def test_short_long_and_numbers(code: str) -> None:
    short_below, long_above = LENGTH_BOUNDS.get(code, WORD_BOUNDS)
    lengths = [length(code, text) for text in texts(code)]
    assert any(n < short_below for n in lengths)
    assert any(n > long_above for n in lengths)
    assert sum(any(char.isdigit() for char in text) for text in texts(code)) >= MIN_WITH_DIGITS


def script_mismatch(code: str, text: str) -> str | None:
    """Why `text` is not in `code`'s script, or None when it is."""
    has = {name: bool(pattern.search(text)) for name, pattern in (("han", HAN), ("kana", KANA), ("hangul", HANGUL))}
    if code == "zh":
        return None if has["han"] and not has["kana"] and not has["hangul"] else "wants Han, no kana or Hangul"
    if code == "ja":
        return None if has["kana"] and not has["hangul"] else "wants kana, no Hangul"
    if code == "ko":
        return None if has["hangul"] and not has["kana"] else "wants Hangul, no kana"
    letters = [char for char in text if char.isalpha()]
    cyrillic = sum(bool(CYRILLIC.match(char)) for char in letters)
    if code == "ru":
        return None if cyrillic >= MIN_CYRILLIC_SHARE * len(letters) else "wants mostly Cyrillic letters"
    return None if not cyrillic and not any(has.values()) else "wants no CJK or Cyrillic"


@pytest.mark.parametrize("code", CODES)
def test_script_matches_language(code: str) -> None:
    wrong = {text: why for text in texts(code) if (why := script_mismatch(code, text))}
    assert not wrong


@pytest.mark.parametrize("code", CODES)
def test_detector_never_names_another_language(code: str) -> None:
    """detect_language may be unsure (None), but a sentence of this set is never taken for another language."""
    asked = [text for text in texts(code) if code in CJK or word_count(text) >= MIN_DETECTED_WORDS]
    assert asked
    detected = {text: detect_language(text) for text in asked}
    assert {text: found for text, found in detected.items() if found not in (LANGUAGE_NAMES[code], None)} == {}
