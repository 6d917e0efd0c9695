"""Properties of text normalisation that hold for every language and any input: it never raises, it is
idempotent, it never loses a word it does not rewrite, and a web address keeps its host's words in order."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from qwen3_tts_server.text.normalize import LANGUAGES, normalize

FAST = settings(max_examples=60, deadline=None)

languages = st.sampled_from(LANGUAGES)
# Words of five letters or more (longer than any abbreviation, unit or currency code rewritten), each in one
# script: one that spaces its words (up to Georgian), or Chinese, kana or hangul.
words = st.one_of(
    st.text(st.characters(categories=["L"], max_codepoint=0x10FF), min_size=5, max_size=10),
    *(
        st.text(st.characters(categories=["L"], min_codepoint=low, max_codepoint=high), min_size=5, max_size=10)
        for low, high in ((0x4E00, 0x9FFF), (0x3041, 0x30FF), (0xAC00, 0xD7A3))
    ),
)
numbers = st.one_of(
    st.integers(-(10**7), 10**12).map(str),
    st.decimals(-(10**6), 10**6, places=2, allow_nan=False, allow_infinity=False).map(str),
    st.from_regex(r"[0-9]{1,3}([,. ][0-9]{3}){1,2}([.,][0-9]{1,2})?", fullmatch=True),
    st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{1,2}:[0-9]{2}|\+?[0-9 ()-]{7,16}", fullmatch=True),
)
symbols = st.sampled_from(
    ["$", "€", "£", "¥", "%", "°C", "km", "kg", "km/h", "&", "+", "=", "@", "#", "/", "-", "–", "~", ":", ".", ","]
)
punctuation = st.sampled_from([",", ".", "!", "?", ";", "\n"])
# Pieces that the language rules look for around numbers.
cues = st.sampled_from(
    ["st", "er", "º", "ª", "-й", "-го", "年", "月", "第", "개", "월", "h", "pm", "Dr.", "No.", "etc.", "www.", "http://",
     ".com", ".de", "de", "in", "am", "January", "Januar", "janvier", "января", "году", "USD", "R$", "'", "("]
)  # fmt: skip
glued = st.lists(st.one_of(numbers, symbols, cues, words), min_size=1, max_size=4).map("".join)
mixed = st.lists(st.one_of(words, numbers, symbols, punctuation, cues, glued), max_size=14).map(" ".join)
hosts = st.lists(st.from_regex(r"[a-z]{2,10}", fullmatch=True), min_size=1, max_size=3)
domains = st.sampled_from(["com", "org", "net", "io", "de", "fr", "jp"])
paths = st.sampled_from(["", "/", "/a/b?c=1", "/x2"])
schemes = st.sampled_from(["https://", "", "www."])


@FAST
@given(st.text(max_size=60), languages)
def test_never_raises_and_is_idempotent_on_any_text(text: str, language: str) -> None:
    once = normalize(text, language)
    assert normalize(once, language) == once


@FAST
@given(mixed, languages)
def test_idempotent_on_numbers_symbols_and_words(text: str, language: str) -> None:
    once = normalize(text, language)
    assert normalize(once, language) == once


@FAST
@given(st.lists(st.one_of(words, numbers, symbols, punctuation), max_size=12), languages)
def test_no_word_is_lost(tokens: list[str], language: str) -> None:
    spoken = normalize(" ".join(tokens), language)
    position = 0
    for token in tokens:
        if re.fullmatch(r"[^\W\d_]{5,}", token):
            found = spoken.find(token, position)
            assert found >= 0, (token, spoken)
            position = found + len(token)


@FAST
@given(st.lists(st.tuples(words, punctuation), max_size=8), languages)
def test_text_without_digits_or_symbols_is_unchanged(pieces: list[tuple[str, str]], language: str) -> None:
    text = " ".join(word + mark for word, mark in pieces)
    assert normalize(text, language) == re.sub(r" ?\n ?", "\n", text).strip()


@FAST
@given(hosts, domains, paths, schemes, languages)
def test_web_address_keeps_its_host_words_in_order(
    labels: list[str], domain: str, path: str, scheme: str, language: str
) -> None:
    address = f"{scheme}{'.'.join(labels)}.{domain}{path}"
    spoken = normalize(f"Go to {address} now", language)
    position = 0
    for label in [*labels, domain]:
        found = spoken.find(label, position)
        assert found >= 0, (address, spoken)
        position = found + len(label)
    assert "." not in spoken
