"""The one rule for "is this CJK?" (text/scripts.py) and the front end's use of it: emoji are not CJK."""

from __future__ import annotations

import pytest

from qwen3_tts_server.text.frontend import text_segments
from qwen3_tts_server.text.scripts import is_cjk

CJK_SAMPLES = {
    "Han": "中",
    "Han extension A": "㐀",
    "Han extension B": "𠀀",
    "compatibility ideograph": "豈",
    "radical": "⺀",
    "hiragana": "あ",
    "katakana": "ア",
    "prolonged sound mark": "ー",
    "half-width katakana": "ｱ",
    "Hangul syllable": "한",
    "Hangul jamo": "ᄀ",
    "Hangul compatibility jamo": "ㄱ",
    "bopomofo": "ㄅ",
    "ideographic full stop": "。",
    "ideographic comma": "、",
    "corner bracket": "「",
    "half-width full stop": "｡",
    "full-width comma": "，",
    "full-width digit": "１",
    "full-width letter": "Ａ",
    "small comma": "﹐",
    "square kilogram": "㎏",
}
OTHER_SAMPLES = {
    "smiley": "🙂",
    "party popper": "🎉",
    "watch": "⌚",
    "squared CJK emoji": "🈚",
    "star": "★",
    "Latin": "a",
    "Latin with accent": "é",
    "Cyrillic": "Ж",
    "Greek": "λ",
    "digit": "5",
    "Arabic-Indic digit": "٣",
    "space": " ",
    "hyphen": "-",
}


@pytest.mark.parametrize("char", CJK_SAMPLES.values(), ids=CJK_SAMPLES.keys())
def test_cjk_scripts_and_marks_are_cjk(char):
    assert is_cjk(char)


@pytest.mark.parametrize("char", OTHER_SAMPLES.values(), ids=OTHER_SAMPLES.keys())
def test_emoji_symbols_and_other_scripts_are_not_cjk(char):
    assert not is_cjk(char)


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Call 5 🙂", "Call five 🙂"),
        ("🎉 5", "🎉 five"),
        ("⌚ $5", "⌚ five dollars"),
    ],
)
def test_undetected_text_with_emoji_is_read_in_english(text, spoken):
    (segment,) = text_segments(text, None, normalize_text=True)
    assert (segment.language, segment.text) == ("auto", spoken)


@pytest.mark.parametrize(
    ("text", "language", "spoken"),
    [
        ("你好。我有3个苹果。", "chinese", "你好。我有三个苹果。"),
        ("今日は5時です。明日も来ます。", "japanese", "今日は五時です。明日も来ます。"),
        ("사과 3개 있어요. 배도 있어요.", "korean", "사과 세개 있어요. 배도 있어요."),
        ("5。", "auto", "五。"),
    ],
)
def test_cjk_sentences_are_joined_and_read_as_before(text, language, spoken):
    """Sentences of one language are joined back as written: no space after a CJK mark."""
    (segment,) = text_segments(text, None, normalize_text=True)
    assert (segment.source, segment.language, segment.text) == (text, language, spoken)


def test_a_sentence_ending_in_an_emoji_is_joined_to_the_next_with_a_space():
    (segment,) = text_segments("I saw 2 cats 🎉\nThey were really cute.", None, normalize_text=True)
    assert segment.source == "I saw 2 cats 🎉 They were really cute."
