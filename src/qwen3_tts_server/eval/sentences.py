"""The evaluation's sentences (`sentences.json`): ten languages, 30 to 50 each, written for it, with numbers, dates,
names, questions, short and long; versioned, so that figures from two runs say which set they come from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from ..errors import InvalidInputError

REFERENCE_ID = "en-23"  # the set's own reference for a clone: a sentence of narration, about nine seconds spoken


@dataclass(frozen=True)
class Sentence:
    id: str  # "<code>-<nn>"
    language: str  # ISO 639-1 code
    text: str


@dataclass(frozen=True)
class SentenceSet:
    version: int
    sentences: tuple[Sentence, ...]


def sentence_set(languages: list[str] | None = None, per_language: int | None = None) -> SentenceSet:
    """The set, or its sentences in `languages` (ISO codes; None: all), the first `per_language` of each."""
    data = json.loads((resources.files("qwen3_tts_server") / "eval" / "sentences.json").read_text(encoding="utf-8"))
    known = data["languages"]
    wanted = languages or list(known)
    unknown = [code for code in wanted if code not in known]
    if unknown:
        raise InvalidInputError(f"no sentences in {', '.join(unknown)}: one of {', '.join(known)}", param="languages")
    sentences = [Sentence(entry["id"], code, entry["text"]) for code in wanted for entry in known[code][:per_language]]
    return SentenceSet(data["version"], tuple(sentences))


def reference_sentence() -> Sentence:
    """The sentence a preset speaker says to make the set's own reference recording for a clone."""
    (sentence,) = [item for item in sentence_set(["en"]).sentences if item.id == REFERENCE_ID]
    return sentence
