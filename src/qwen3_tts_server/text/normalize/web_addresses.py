"""Web and e-mail addresses: found before any other rule (their dots and digits are not numbers) and read
piece by piece in the language: "example.com/a?b=1" -> "example dot com slash a question mark b equals one".

Matches are maximal runs of address characters, then validated so that a run which is not an address can
never hold one that a second pass would find once the other rules have read its digits (idempotence).
"""

from __future__ import annotations

import re

from ..scripts import CJK_RANGES
from .language import Language

_TOP_LEVEL = {
    "com", "net", "org", "edu", "gov", "mil", "int", "io", "ai", "co", "uk", "de", "fr", "es", "it", "pt", "br",
    "ru", "cn", "jp", "kr", "eu", "us", "ca", "au", "info", "biz", "tv", "app", "dev", "ch", "nl", "online", "site",
}  # fmt: skip
NARROW_LETTER = rf"[^\W\d_{CJK_RANGES}]"  # a letter of a script that puts spaces between words
_NARROW_ALNUM = rf"[^\W_{CJK_RANGES}]"
_URL_CHARACTER = r"[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]"  # RFC 3986: an address ends at "，" or "。"
_ADDRESS = re.compile(
    rf"(?<!{NARROW_LETTER})(?<![._%+@/-])(?:"
    rf"(?P<url>(?:https?|ftp)://{_URL_CHARACTER}+)"
    r"|(?<![0-9-])(?P<local>[A-Za-z0-9._%+-]+)@(?P<domain>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
    rf"|(?<![0-9-])(?P<host>(?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+(?:/{_URL_CHARACTER}*)?)"
    rf")(?!{_NARROW_ALNUM}|[@-])"
)
_TRAILING = re.compile(r"[.,;:!?'\")\]}»”’]+$")
_SCHEME = re.compile(r"^https?://", re.IGNORECASE)
_SCHEME_START = re.compile(r"(?:https?|ftp)://")
_LEADING_LETTERS = re.compile("[A-Za-z]*")
_LONGEST_HOST = 253
_CONTINUATION = re.compile(r"(?:\.[A-Za-z0-9-]+)+")
_PIECE = re.compile(r"[^\W\d_]+|[0-9]+|.", re.DOTALL)


def _is_host(host: str) -> bool:
    """A label after the first ends in a top-level domain where it ends or where its digits begin: digits
    are what other rules rewrite, so "a.de5x" counts, else "a.de five x" would be an address next time."""
    if len(host) > _LONGEST_HOST:
        return False
    labels = host.lower().split(".")
    for index, label in enumerate(labels[1:], start=1):
        letters = _LEADING_LETTERS.match(label).group()
        if letters in _TOP_LEVEL and (letters == label or index < len(labels) - 1 or label[len(letters)].isdigit()):
            return True
    return False


def continues_address(text: str, position: int) -> bool:
    """Whether a word ending at `position` would become part of a web address: ".com", ".de5"."""
    match = _CONTINUATION.match(text, position, position + _LONGEST_HOST)
    return bool(match) and _is_host("x" + match.group())


def _found(match: re.Match[str]) -> list[tuple[str, bool]]:
    """A match as (text, is_address) pieces; a local part with no letter or digit is not an address's."""
    if match["url"]:
        url = _TRAILING.sub("", match["url"])
        return [(url, True)] if url.split("://", 1)[1] else []
    if match["domain"]:
        if not _is_host(match["domain"]):
            return []
        if any(char.isalnum() for char in match["local"]):
            return [(match.group(), True)]
        return [(match["local"] + "@", False), (match["domain"], True)]
    host = _TRAILING.sub("", match["host"])
    return [(host, True)] if _is_host(host.split("/", 1)[0]) else []


def split_addresses(text: str) -> list[tuple[str, bool]]:
    """`text` as (piece, is_address) in order. A run that is no address may still hold a URL from its
    scheme on: "0.00http://x.com"."""
    parts: list[tuple[str, bool]] = []
    position = done = 0
    while match := _ADDRESS.search(text, position):
        found = _found(match)
        if not found:
            scheme = _SCHEME_START.search(text, match.start() + 1, match.end() + len("https://"))
            position = scheme.start() if scheme and scheme.start() < match.end() else match.end()
            continue
        parts.append((text[done : match.start()], False))
        parts += found
        position = done = match.start() + sum(len(piece) for piece, _ in found)
    parts.append((text[done:], False))
    return [part for part in parts if part[0]]


def read_address(address: str, language: Language) -> str:
    """Letters stay as written, digits are read one by one, punctuation is named; http(s):// is not said."""
    body = _SCHEME.sub("", address).rstrip("/")
    words = []
    for piece in _PIECE.findall(body):
        if piece.isascii() and piece.isdigit():
            words.append(language.digits(piece))
        else:
            words.append(language.web_words.get(piece, piece))
    return " ".join(words)
