"""The CJK scripts, written without spaces between words: Han, kana and Hangul, with the CJK punctuation, signs and
full-width forms written among them. Emoji and other symbols are not CJK, though many are as wide.

The *_RANGES strings are bodies of a regex character class: f"[{HAN_RANGES}]", f"[^\\W{CJK_RANGES}]"."""

from __future__ import annotations

import re

HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"  # ideographs: extensions, compatibility
KANA_RANGES = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # hiragana, katakana and its extension, half-width katakana
HANGUL_RANGES = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"  # jamo, compatibility jamo, syllables
# Radicals, CJK symbols and punctuation (。「」), bopomofo, kanbun, strokes, enclosed and compatibility signs (㈱, ㎏),
# vertical, compatibility and small forms (︐, ﹐), half- and full-width forms (，, １, ｱ).
_MARKS_RANGES = "\u2e80-\u303f\u3100-\u312f\u3190-\u31ef\u3200-\u33ff\ufe10-\ufe1f\ufe30-\ufe6f\uff00-\uffef"
CJK_RANGES = HAN_RANGES + KANA_RANGES + HANGUL_RANGES + _MARKS_RANGES
_CJK = re.compile(f"[{CJK_RANGES}]")


def is_cjk(char: str) -> bool:
    """Whether `char` (one character) is CJK: Han, kana, Hangul, or CJK punctuation, signs or full-width forms."""
    return _CJK.match(char) is not None
