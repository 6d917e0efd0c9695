"""Text normalisation for speech: numbers, currencies, dates, times, units, phone numbers, web addresses,
abbreviations and symbols become the words a speaker says, in the text's language.

    normalize("It costs $5.50 (10% off) until 2024-01-15.", "english")
    -> "It costs five dollars and fifty cents (ten percent off) until January fifteenth, twenty twenty-four."
"""

from __future__ import annotations

from .pipeline import LANGUAGES, run, tidy


def normalize(text: str, language: str) -> str:
    """Spoken form of `text` in `language` (one of LANGUAGES). Any other language value (e.g. "auto",
    dialect names) returns the text with only language-independent cleanup (whitespace), never raises."""
    if language not in LANGUAGES:
        return tidy(text)
    return run(text, language)


__all__ = ["LANGUAGES", "normalize"]
