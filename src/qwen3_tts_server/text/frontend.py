"""The text front end: what the model is given for a request's text. Characters that are never read (control
and invisible format characters, lone surrogates, noncharacters: see cleanup.py) are removed first. Long input
is cut into segments at sentence and clause boundaries, each segment's language is detected when the request
leaves it to Auto, and each is normalised (numbers, dates, symbols, ... in words) in its language unless asked
not to. A segment left with no letter or digit (only emoji, punctuation, symbols or marks) is not spoken: no
segments at all means the text has nothing to say."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from .cleanup import remove_unspoken
from .language import detect_language
from .normalize import LANGUAGES, normalize
from .scripts import is_cjk
from .segment import speakable, speech_segments, split_sentences

log = logging.getLogger(__name__)
SEGMENT_MAX_CHARS = 300  # about 20 s of speech: long enough for natural prosody, short enough to pipeline


@dataclass(frozen=True)
class TextSegment:
    source: str  # as written
    text: str  # as spoken: normalised unless normalisation is off
    language: str  # the language it is spoken in; "auto" when the request said Auto and detection was unsure


def text_segments(
    text: str, language: str | None, normalize_text: bool, max_chars: int = SEGMENT_MAX_CHARS
) -> list[TextSegment]:
    """`text` as segments to speak in order; `language` is a model language name, "auto" or None (Auto)."""
    return list(_text_segments(text, (language or "auto").lower(), normalize_text, max_chars))


# Repeated texts (the output cache's hits, retries, a voice agent's stock phrases) skip the front end's 1-3 ms.
@functools.lru_cache(maxsize=1024)
def _text_segments(text: str, language: str, normalize_text: bool, max_chars: int) -> tuple[TextSegment, ...]:
    text = remove_unspoken(text)
    runs = _language_runs(text) if language == "auto" else [(language, text)]
    segments = []
    for run_language, run_text in runs:
        known = run_language if run_language in LANGUAGES else None
        # Undetected text is still read in words: as English when it is not in a CJK script (the model gets Auto).
        reading = known or ("chinese" if any(map(is_cjk, run_text)) else "english")
        for source in speech_segments(run_text, known, max_chars):
            spoken = normalize(source, reading) if normalize_text else source
            if speakable(spoken):  # else a run of emoji or symbols too long to go with a neighbour: nothing to say
                segments.append(TextSegment(source, spoken, run_language))
    return tuple(segments)


def text_cache_entries() -> int:
    """Texts the front end remembers (at most 1024)."""
    return _text_segments.cache_info().currsize


def clear_text_cache() -> int:
    """Forget the front end's remembered texts; returns how many there were."""
    held = text_cache_entries()
    _text_segments.cache_clear()
    return held


def _language_runs(text: str) -> list[tuple[str, str]]:
    """Consecutive sentences of one detected language, joined: (language or "auto", text). A sentence too short
    or too mixed to tell goes with its neighbours, so mixed-language input is spoken language by language; where
    no sentence can be told ("Tel. +49 30 1234567, Durchwahl 42": "Tel." and a one-word rest), the whole text's
    language is theirs."""
    whole = detect_language(text)
    sentences = split_sentences(text, whole)
    # One sentence (a WebSocket clause, a short request): the whole text's detection is the sentence's.
    languages = [whole] if len(sentences) == 1 else [detect_language(sentence) for sentence in sentences]
    known = [lang for lang in languages if lang] or [whole or "auto"]
    runs: list[tuple[str, str]] = []
    for sentence, detected in zip(sentences, languages, strict=True):
        run_language = detected or (runs[-1][0] if runs else known[0])
        if runs and runs[-1][0] == run_language:
            previous = runs[-1][1]
            runs[-1] = (run_language, previous + ("" if is_cjk(previous[-1]) else " ") + sentence)
        else:
            runs.append((run_language, sentence))
    return runs


def warm_up_text_front_end() -> None:
    """Build what the front end builds on first use (the language detector, the normalisers' grammars), so
    that no request pays for it."""
    for language in LANGUAGES:
        text_segments("Warm up: 1, 2 and 3.", language, normalize_text=True)
    try:
        detect_language("Warm up the language detector.")
    except ModuleNotFoundError as exc:  # lingua missing (the GPU check's kit: its wheel outweighs what a call carries)
        log.warning("no language detection (%s): a request must name its language", exc)
