"""Characters that are no part of what is read, removed before the text front end looks at a text, whether or
not it is normalised:
- control characters other than whitespace (NUL, BEL, ESC, DEL, the C1 controls);
- invisible format characters: bidi marks, embeddings and isolates, zero-width space, word joiner, BOM, soft
  hyphen, emoji tag characters, ... but the zero-width joiner and non-joiner, which shape emoji sequences and
  scripts;
- lone surrogates: not Unicode text (no UTF-8 for them, and the tokenizer refuses them), though a JSON string can
  carry one as "\\ud800" and a command line as an undecodable byte;
- noncharacters (U+FDD0-U+FDEF and the last two code points of every plane).
They are removed, not replaced by a space: none of them shows, so the text reads as it looks without them."""

from __future__ import annotations

import re
import unicodedata

_SHAPING = "\u200c\u200d"  # zero-width non-joiner and joiner
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0e-\x1b\x7f]")  # the ASCII ones that are not whitespace


def _unspoken(char: str) -> bool:
    category = unicodedata.category(char)
    if category == "Cc":
        return not char.isspace()
    if category == "Cf":
        return char not in _SHAPING
    code = ord(char)
    return category == "Cs" or 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE


def remove_unspoken(text: str) -> str:
    """`text` without the characters listed above."""
    if text.isascii():
        return _ASCII_CONTROLS.sub("", text)
    return "".join(char for char in text if not _unspoken(char))
