"""The model's language names and the ISO 639-1 codes Wyoming clients (Home Assistant) use for them."""

from __future__ import annotations

import re

from ..text.language import LANGUAGE_CODES, LANGUAGE_NAMES

_REGION = re.compile(r"[-_].*")  # en-US, pt_BR: the language is what the model tells apart


def language_codes(names: list[str]) -> list[str]:
    """The codes of the model's languages (`auto` left out; a name without a code as it is)."""
    return [LANGUAGE_CODES.get(name, name) for name in names if name != "auto"]


def model_language(requested: object) -> object:
    """A requested language (`en`, `en-US`, `pt_BR`, or a model name such as `English`) as the model's name;
    anything else as it is, for the request's check to refuse with the valid names."""
    if not isinstance(requested, str):
        return requested
    return LANGUAGE_NAMES.get(_REGION.sub("", requested).lower(), requested)
