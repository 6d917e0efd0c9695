"""The normalisation pipeline: tidy whitespace, set web and e-mail addresses apart, apply the language's
rules in order to the rest, read the addresses, tidy again. Languages and their compiled rules are built
on first use, once, under a lock (the server calls in from worker threads)."""

from __future__ import annotations

import importlib
import re
import threading
import unicodedata

from ..scripts import is_cjk
from .language import Language, Rule
from .shared_rules import shared_rules
from .web_addresses import continues_address, read_address, split_addresses

LANGUAGES: tuple[str, ...] = (
    "chinese", "english", "japanese", "korean", "german", "french", "russian", "portuguese", "spanish", "italian"
)  # fmt: skip

_DIGIT = re.compile("[0-9]")
_SPACES = re.compile(r"[^\S\n]+")
_AROUND_NEWLINE = re.compile(r" ?\n ?")
_FULLWIDTH = str.maketrans("０１２３４５６７８９％", "0123456789%")
_FULLWIDTH_BETWEEN_DIGITS = re.compile(r"(?<=[0-9])[．：，／－](?=[0-9])")
_lock = threading.Lock()
_built: dict[str, tuple[Language, tuple[Rule, ...]]] = {}


def tidy(text: str) -> str:
    """One space between words, none around line breaks or at the ends."""
    return _AROUND_NEWLINE.sub("\n", _SPACES.sub(" ", text)).strip()


def language_and_rules(name: str) -> tuple[Language, tuple[Rule, ...]]:
    built = _built.get(name)
    if built is None:
        with _lock:
            built = _built.get(name)
            if built is None:
                language = importlib.import_module(f".{name}", __package__).LANGUAGE
                built = _built[name] = (language, shared_rules(language))
    return built


def run(text: str, name: str) -> str:
    language, rules = language_and_rules(name)
    text = text.translate(_FULLWIDTH)
    text = _FULLWIDTH_BETWEEN_DIGITS.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    pieces = []
    for piece, is_address in split_addresses(tidy(text)):
        pieces.append(read_address(piece, language) if is_address else apply(piece, rules))
    return tidy(_join(pieces))


def apply(text: str, rules: tuple[Rule, ...]) -> str:
    for rule in rules:
        if rule.needs_digit and not _DIGIT.search(text):
            continue
        text = rule.pattern.sub(lambda match, rule=rule: _padded(match, rule.speak(match)), text)
    return text


def _padded(match: re.Match[str], words: str) -> str:
    """Words replacing a match run on into a letter or digit beside it only in Chinese or Japanese script, and
    never on from "#", "@" or "x." or into ".com" (a second pass would read "#at" as a hashtag, "cero.de" or
    "dollars.com" as a web address)."""
    if words == match.group():
        return words
    text, start, end = match.string, match.start(), match.end()
    if _apart(text[max(start - 2, 0) : start], words):
        words = " " + words
    if end < len(text) and (_runs_on(words[-1:], text[end]) or continues_address(text, end)):
        words += " "
    return words


def _apart(before: str, words: str) -> bool:
    """Whether words written after `before` (the two characters in front) need a space there."""
    if not before or not words:
        return False
    return _runs_on(before[-1], words[0]) or before[-1] in "#@" or before[-1] == "." and before[0].isalnum()


def _runs_on(left: str, right: str) -> bool:
    return left.isalnum() and right.isalnum() and not (is_cjk(left) and is_cjk(right))


def _join(pieces: list[str]) -> str:
    text = ""
    for piece in pieces:
        text += " " + piece if _apart(text[-2:], piece) else piece
    return text
