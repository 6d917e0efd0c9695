"""The language of a text, as one of the model's ten names, or None when unsure (the model's Auto then decides).

Script first: Hangul is Korean, kana Japanese, Han without kana Chinese, Cyrillic Russian. Latin-script text goes
to lingua, restricted to the six Latin-script languages. Measured by benchmarks/segment_detect_time.py on the
labelled sentences of tests/test_language.py (right/None/wrong): high accuracy 97/11/0 of 108 short (2-5 words)
and 36/0/0 medium; low accuracy 90/10/8 and 36/0/0. A wrong language is worse than None, so high accuracy, at
150-190 MB RSS. Preloaded, a 1-2 s build on the first call: lazy loading used as much memory (every model is a
candidate for most text) and stalls about 2 s in whichever call first needs a model, maybe more than once.

Numbers, and what is written with them, are left out before counting words and asking lingua: letters glued to
digits ("3rd", "1er", "18h30", "Q3", "v2.3.1") and the unit and currency signs the normalisers read beside a
number ("12 kg", "USD 5", "R$ 9,99") are shared by the six languages, yet lingua scored them as words
("12 kg, 3.5 lbs, 20 oz" was German, "Q3 2024: $1.2M revenue" French).
"""

from __future__ import annotations

import re
import threading
from functools import cache
from typing import TYPE_CHECKING

from .scripts import HAN_RANGES, HANGUL_RANGES, KANA_RANGES

if TYPE_CHECKING:  # lingua (its models are some 100 MB) is imported when a detector is built
    from lingua import LanguageDetector

# The model's languages and their ISO 639-1 codes (sentence splitting by pysbd, Wyoming clients).
LANGUAGE_CODES = {
    "chinese": "zh",
    "english": "en",
    "japanese": "ja",
    "korean": "ko",
    "german": "de",
    "french": "fr",
    "russian": "ru",
    "portuguese": "pt",
    "spanish": "es",
    "italian": "it",
}
LANGUAGE_NAMES = {code: name for name, code in LANGUAGE_CODES.items()}  # a code's language, as the model names it
LATIN_LANGUAGES = {  # by lingua's names for them
    "ENGLISH": "english",
    "GERMAN": "german",
    "FRENCH": "french",
    "PORTUGUESE": "portuguese",
    "SPANISH": "spanish",
    "ITALIAN": "italian",
}
# The smallest that gave no wrong answer on the labelled sentences; short ambiguous ones ("Acho que sim.") get None.
MIN_RELATIVE_DISTANCE = 0.1
# Two words, the fewest detected, need twice that: two-word digit-heavy texts lingua got wrong ("Llame al 912 345
# 678" Italian, "Fax: +1 212 555 0100, Suite 5" French) led by 0.11-0.14, the right two-word sentences by 0.22 up.
MIN_TWO_WORD_DISTANCE = 0.2
MIN_LATIN_WORDS = 2  # one word ("Pizza", "Hello", "OK") is a loanword or a wrong guess too often

_SCRIPTS = {
    "hangul": re.compile(f"[{HANGUL_RANGES}]"),
    "kana": re.compile(f"[{KANA_RANGES}]"),
    "han": re.compile(f"[{HAN_RANGES}]"),
    "cyrillic": re.compile("[\u0400-\u052f]"),
    "latin": re.compile("[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]"),
}
_WORD = re.compile(r"[^\W\d_]+")
# 42, 3.5, 010-0199, 15/03/2024, 18h30, 3rd, Q3, v2.3.1; from a word start, so no letter run is retried.
_NUMERIC = r"(?<!\w)\w*\d\w*(?:[.,:/-]\w*\d\w*)*"
# The six languages' letters: a text with others (Polish ł, Turkish ı, Vietnamese ạ) is in none of them, though
# lingua, knowing only these six, would name one.
_OWN_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzäöüßàâæçéèêëîïôœùûÿáíóúñãõìò")

_lock = threading.Lock()
_detector: LanguageDetector | None = None


def build_detector(high_accuracy: bool = True, preload: bool = True) -> LanguageDetector:
    """lingua for the six Latin-script languages (latin_language applies the minimum relative distance)."""
    from lingua import Language, LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_languages(*(getattr(Language, name) for name in LATIN_LANGUAGES))
    if not high_accuracy:
        builder = builder.with_low_accuracy_mode()
    if preload:
        builder = builder.with_preloaded_language_models()
    return builder.build()


def _shared_detector() -> LanguageDetector:
    global _detector
    with _lock:
        if _detector is None:
            _detector = build_detector()
        return _detector


@cache
def _measures() -> re.Pattern[str]:
    """A number with a unit or currency sign written before or after it (the signs of the six normalisers)."""
    from .normalize.pipeline import language_and_rules

    tables = [language_and_rules(name)[0] for name in LATIN_LANGUAGES.values()]
    signs = {sign for table in tables for sign in (*table.units, *table.currencies)}
    sign = "|".join(map(re.escape, sorted(signs, key=len, reverse=True)))  # the longest first: "km/h" before "km"
    return re.compile(rf"(?:(?<!\w)(?:{sign})\s?)?{_NUMERIC}(?:\s?(?:{sign})(?!\w))?")


def words(text: str) -> list[str]:
    """The words that tell the language: numbers and what is written with them left out."""
    return _WORD.findall(_measures().sub(" ", text))


def latin_language(text: str, detector: LanguageDetector) -> str | None:
    """The Latin-script language of `text` by `detector`, or None for fewer than two words, letters none of the
    six languages has, or no clear winner."""
    found = words(text)
    if len(found) < MIN_LATIN_WORDS:
        return None
    if not _OWN_LETTERS.issuperset(_SCRIPTS["latin"].findall(text.lower())):
        return None
    # lingua reads the words alone (it skips punctuation anyway), so no lone surrogate reaches it.
    first, second = detector.compute_language_confidence_values(" ".join(found))[:2]
    distance = MIN_TWO_WORD_DISTANCE if len(found) == MIN_LATIN_WORDS else MIN_RELATIVE_DISTANCE
    return LATIN_LANGUAGES[first.language.name] if first.value - second.value >= distance else None


def _script_language(text: str) -> str | None:
    """The language the script says, "latin" for Latin script, None for none of these scripts. Mixed scripts:
    the one with the most text, a CJK character counting as three letters (each is about a syllable)."""
    counts = {script: len(pattern.findall(text)) for script, pattern in _SCRIPTS.items()}
    cjk = 3 * (counts["han"] + counts["kana"])
    weights = {
        "korean": 3 * counts["hangul"],
        "japanese": cjk if counts["kana"] else 0,
        "chinese": 0 if counts["kana"] else cjk,
        "russian": counts["cyrillic"],
        "latin": counts["latin"],
    }
    best = max(weights, key=weights.__getitem__)
    return best if weights[best] else None


def detect_language(text: str) -> str | None:
    """One of the ten languages, or None when unsure (the model's own Auto then decides). A cheap script
    pass first: Hangul -> korean, kana -> japanese, Cyrillic -> russian, Han without kana -> chinese;
    Latin-script text goes to lingua restricted to english, german, french, portuguese, spanish, italian."""
    language = _script_language(text)
    return latin_language(text, _shared_detector()) if language == "latin" else language
