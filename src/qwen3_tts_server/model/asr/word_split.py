"""The words the forced aligner times, split from a transcript as the official package splits them
(docs/asr_reference.md, section k).

Most languages: per space-separated piece, only letters, digits and apostrophes kept, every CJK ideograph a word of
its own. Japanese: the words of the nagisa tagger (the optional extra `japanese`). Korean: every space-separated
piece of three characters or more cut once, after its longest prefix (of two characters or more) that the official
Korean word list knows (the rule of soynlp's LTokenizer, which the official package runs with that list). The
list ships inside the official package only: it is read from a file the operator names, or from an installed
qwen-asr distribution, and Korean word timestamps are refused without it.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
import unicodedata
from functools import cache
from pathlib import Path
from types import ModuleType

import torch

from ...errors import ConfigurationError

CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
)
# Where the official package keeps its Korean word list, inside its distribution.
OFFICIAL_DISTRIBUTION = "qwen-asr"
OFFICIAL_KOREAN_LIST = "qwen_asr/inference/assets/korean_dict_jieba.dict"
KOREAN_LIST_HELP = (
    "Korean word timestamps need the official Korean word list, which ships inside the qwen-asr package: "
    f"download it without installing (pip download qwen-asr==0.0.6 --no-deps) and name {OFFICIAL_KOREAN_LIST} "
    "from the wheel with --korean-words, or install qwen-asr beside this server"
)
_nagisa_lock = threading.Lock()  # the tagger's network is one shared object


def is_kept(character: str) -> bool:
    return character == "'" or unicodedata.category(character)[0] in "LN"


def _kept(token: str) -> str:
    return "".join(filter(is_kept, token))


def _ideograph(character: str) -> bool:
    return any(low <= ord(character) <= high for low, high in CJK_RANGES)


def spaced_words(text: str) -> list[str]:
    """Per space-separated piece, its kept characters, each ideograph a word apart."""
    words: list[str] = []
    for piece in text.split():
        run = ""
        for character in _kept(piece):
            if _ideograph(character):
                words += [run, character] if run else [character]
                run = ""
            else:
                run += character
        if run:
            words.append(run)
    return words


def subnormals_kept() -> bool:
    """Whether this thread's float arithmetic keeps subnormal numbers (IEEE 754) rather than flushing them to 0."""
    return sys.float_info.min / 2 > 0


@cache
def _nagisa() -> ModuleType:
    kept = subnormals_kept()
    try:
        import nagisa  # loads its tagger's weights once
    except ImportError:
        raise ConfigurationError(
            "Japanese word timestamps need the Japanese word segmenter: pip install 'qwen3-tts-server[japanese]'",
            param="language",
        ) from None
    finally:
        # DyNet, under nagisa, is built with -ffast-math: loading it switches this thread (and the threads it
        # starts) to flushing subnormals to zero, which would change every model's arithmetic here. Undone.
        if kept and not subnormals_kept():
            torch.set_flush_denormal(False)
    return nagisa


def japanese_words(text: str) -> list[str]:
    tagger = _nagisa()
    with _nagisa_lock:
        tokens = tagger.tagging(text).words
    return [word for word in map(_kept, tokens) if word]


def korean_pieces(text: str, known: frozenset[str]) -> list[str]:
    """Each space-separated piece cut after its longest known prefix of 2+ characters; one with none known, or of
    2 characters or fewer, stays whole. Punctuation is dropped after the cut, as the official does."""
    pieces: list[str] = []
    for piece in text.split():
        cut = max((e for e in range(2, len(piece) + 1) if piece[:e] in known), default=len(piece))
        cut = cut if len(piece) > 2 else len(piece)
        pieces += [part for part in (piece[:cut], piece[cut:]) if part]
    return [word for word in map(_kept, pieces) if word]


def read_korean_list(path: Path) -> frozenset[str]:
    """The words of a word list in the official format: the first field of every line that has one."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the Korean word list {path}: {exc}", param="korean_words") from None
    return frozenset(line.split()[0] for line in lines if line.strip())


def installed_korean_list() -> Path | None:
    """The official word list inside an installed qwen-asr distribution (found without importing it), if any."""
    try:
        path = Path(str(importlib.metadata.distribution(OFFICIAL_DISTRIBUTION).locate_file(OFFICIAL_KOREAN_LIST)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


class WordSplitter:
    """Splits a transcript into the aligner's words for its language. `korean_words`: the Korean word list's
    path; None looks for an installed qwen-asr. The list is read on the first Korean transcript."""

    def __init__(self, korean_words: Path | None = None):
        self._korean_path = korean_words
        self._korean: frozenset[str] | None = None

    def korean_list(self) -> frozenset[str]:
        if self._korean is None:
            path = self._korean_path or installed_korean_list()
            if path is None:
                raise ConfigurationError(KOREAN_LIST_HELP, param="korean_words")
            self._korean = read_korean_list(path)
        return self._korean

    def prepare(self, language: str) -> None:
        """Loads what splitting `language` needs (the tagger, the word list), or raises what splitting would."""
        if language.lower() == "japanese":
            _nagisa()
        elif language.lower() == "korean":
            self.korean_list()

    def words(self, text: str, language: str = "") -> list[str]:
        language = language.lower()
        if language == "japanese":
            return japanese_words(text)
        if language == "korean":
            return korean_pieces(text, self.korean_list())
        return spaced_words(text)
