"""The languages Qwen3-ASR transcribes, by the names the model writes and the ISO 639 codes clients send.

A forced language is written into the prompt by its name (docs/asr_reference.md, section h), so every accepted
spelling resolves to one of the 30 official names. The official package takes the names only, in any case;
OpenAI clients send ISO 639-1 codes ("en", "zh"), some send BCP 47 tags ("en-US", "zh-CN") or ISO 639-3
("yue" for Cantonese, "fil"), and all of them are accepted here."""

from __future__ import annotations

from ...errors import InvalidInputError, shown
from .transcript import canonical_language

LANGUAGE_CODES = {
    "Chinese": "zh",
    "English": "en",
    "Cantonese": "yue",
    "Arabic": "ar",
    "German": "de",
    "French": "fr",
    "Spanish": "es",
    "Portuguese": "pt",
    "Indonesian": "id",
    "Italian": "it",
    "Korean": "ko",
    "Russian": "ru",
    "Thai": "th",
    "Vietnamese": "vi",
    "Japanese": "ja",
    "Turkish": "tr",
    "Hindi": "hi",
    "Malay": "ms",
    "Dutch": "nl",
    "Swedish": "sv",
    "Danish": "da",
    "Finnish": "fi",
    "Polish": "pl",
    "Czech": "cs",
    "Filipino": "fil",
    "Persian": "fa",
    "Greek": "el",
    "Romanian": "ro",
    "Hungarian": "hu",
    "Macedonian": "mk",
}
SUPPORTED_LANGUAGES = tuple(LANGUAGE_CODES)
# Other codes in use for the same languages: ISO 639-2/3 where clients send them, and the 639-1 codes of
# Tagalog (Filipino's base) and of Cantonese's Chinese macrolanguage region tags (zh-HK).
_ALIASES = {
    "zho": "Chinese",
    "chi": "Chinese",
    "cmn": "Chinese",
    "eng": "English",
    "tl": "Filipino",
    "tgl": "Filipino",
    "zh-hk": "Cantonese",
    "zh-mo": "Cantonese",
    "ms-my": "Malay",
}
_BY_CODE = {code: name for name, code in LANGUAGE_CODES.items()} | _ALIASES


def resolve_language(value: str | None, param: str = "language") -> str | None:
    """The official name of a language given by name (any case) or code; None, blank or `auto` (any case, as the
    earlier ASR server's clients send it): not given (the model identifies it). Anything else is refused with the
    list of what is accepted."""
    if value is None or not value.strip() or value.strip().lower() == "auto":
        return None
    text = value.strip()
    name = canonical_language(text)
    if name in LANGUAGE_CODES:
        return name
    lowered = text.lower().replace("_", "-")
    found = _BY_CODE.get(lowered) or _BY_CODE.get(lowered.split("-")[0])
    if found is None:
        accepted = ", ".join(f"{name} ({code})" for name, code in LANGUAGE_CODES.items())
        raise InvalidInputError(f"unsupported language {shown(value)}; Qwen3-ASR transcribes {accepted}", param=param)
    return found


def language_code(name: str) -> str | None:
    """The ISO 639 code of an official language name (as the model writes it), None for any other text."""
    return LANGUAGE_CODES.get(canonical_language(name))
