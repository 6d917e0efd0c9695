"""Error rates of transcripts against the texts they should say, as papers and model cards give them: word error rate
for the languages written with spaces, character error rate for Chinese, Japanese and Korean, both after the same
normalisation of the two sides (jiwer counts the edits).

Both sides are put in one form before they are compared: numbers, dates, currencies and units in words by the
server's own text front end (so "$5" and "five dollars" are the same words), case folded, punctuation and symbols
removed (an apostrophe inside a word kept: "it's"), spaces collapsed (and, for the character languages, removed).
A rate over many sentences is the corpus rate (all their edits over all their reference words), with a 95%
interval from resampling the sentences."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import jiwer
import numpy as np

from ..text.language import LANGUAGE_NAMES
from ..text.normalize import normalize

CHARACTER_LANGUAGES = ("zh", "ja", "ko")  # scored by characters
RESAMPLES = 1000  # bootstrap resamples for an interval
CONFIDENCE = 0.95


def comparable(text: str, code: str) -> str:
    """`text` (in the language of ISO code `code`) in the form both sides are compared in."""
    spoken = normalize(text, LANGUAGE_NAMES[code]).casefold().replace("\u2019", "'")
    kept = "".join(
        " " if unicodedata.category(character)[0] in "PSZC" and character != "'" else character for character in spoken
    )
    words = [word.strip("'") for word in kept.split() if word.strip("'")]  # an apostrophe inside a word stays
    return "".join(words) if code in CHARACTER_LANGUAGES else " ".join(words)


@dataclass(frozen=True)
class Scored:
    """One sentence: what it should say, what was heard, and the edits between them."""

    id: str
    language: str  # ISO code
    reference: str
    hypothesis: str
    errors: int  # substitutions, deletions and insertions
    units: int  # words (characters in the character languages) of the reference

    @property
    def rate(self) -> float:
        return self.errors / self.units if self.units else 0.0


def score(sentence_id: str, code: str, reference: str, hypothesis: str) -> Scored:
    """One sentence's edits, counted in words or characters as its language is scored."""
    truth, heard = comparable(reference, code), comparable(hypothesis, code)
    units = len(truth) if code in CHARACTER_LANGUAGES else len(truth.split())
    if not truth:
        raise ValueError(f"sentence {sentence_id} has nothing to compare once normalised: {reference!r}")
    if not heard:  # nothing heard: every unit deleted (jiwer refuses an empty side)
        errors = units
    else:
        counted = (
            jiwer.process_characters(truth, heard) if code in CHARACTER_LANGUAGES else jiwer.process_words(truth, heard)
        )
        errors = counted.substitutions + counted.deletions + counted.insertions
    return Scored(sentence_id, code, reference, hypothesis, errors, units)


@dataclass(frozen=True)
class Rate:
    """An error rate over sentences, and its 95% interval."""

    rate: float
    low: float
    high: float
    sentences: int


def error_rate(scored: Sequence[Scored], seed: int = 0) -> Rate:
    """The corpus rate of `scored` (their edits over their units), with a bootstrap interval over the sentences."""
    if not scored:
        raise ValueError("no sentence to rate")
    errors = np.array([sentence.errors for sentence in scored], dtype=np.float64)
    units = np.array([sentence.units for sentence in scored], dtype=np.float64)
    picks = np.random.default_rng(seed).integers(0, len(scored), size=(RESAMPLES, len(scored)))
    rates = errors[picks].sum(axis=1) / units[picks].sum(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(rates, [tail, 100 - tail])
    return Rate(float(errors.sum() / units.sum()), float(low), float(high), len(scored))
