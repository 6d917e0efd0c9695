"""Sentences, speech segments and the incremental segmenter behind the WebSocket's early start."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen3_tts_server.text.scripts import CJK_RANGES
from qwen3_tts_server.text.segment import IncrementalSegmenter, speech_segments, split_sentences

LANGUAGES = [None, "english", "german", "french", "spanish", "italian", "portuguese", "russian", "chinese"]
LANGUAGES += ["japanese", "korean"]


def words(text: str) -> list[str]:
    """Whitespace-separated words, each CJK character a word of its own."""
    return re.findall(rf"[{CJK_RANGES}]|[^\s{CJK_RANGES}]+", text)


def visible(text: str) -> str:
    return "".join(text.split())


def incremental(pieces: list[str], **options) -> tuple[list[str], str]:
    segmenter = IncrementalSegmenter(**options)
    segments = [segment for piece in pieces for segment in segmenter.feed(piece)]
    return segments, segmenter.flush()


def paragraph(length: int, punctuated: bool) -> str:
    sentence = "Dr. Smith paid 3.14 dollars at 3 p.m., e.g. for tea; it was cheap — really cheap. Wait... what? "
    text = sentence if punctuated else re.sub(r"[.,;?—]", "", sentence).replace("  ", " ")
    return (text * (length // len(text) + 1))[:length]


@pytest.mark.parametrize(
    "language, text, sentences",
    [
        (
            "english",
            "Dr. Smith called at 3 p.m. to confirm. He left.",
            ["Dr. Smith called at 3 p.m. to confirm.", "He left."],
        ),
        (
            None,
            "Dr. Smith called at 3 p.m. to confirm. He left.",
            ["Dr. Smith called at 3 p.m. to confirm.", "He left."],
        ),
        ("english", "He lives in the U.S.A. now. Good.", ["He lives in the U.S.A. now.", "Good."]),
        (
            None,
            "Bring fruit, e.g. apples, etc. and Mr. Brown. Done.",
            ["Bring fruit, e.g. apples, etc. and Mr. Brown.", "Done."],
        ),
        ("english", "It costs 3.14 or 1,234.5 dollars. Cheap!", ["It costs 3.14 or 1,234.5 dollars.", "Cheap!"]),
        (
            "german",
            "Es kostet 1.234,5 Euro, z.B. heute. Nr. 5 ist frei.",
            ["Es kostet 1.234,5 Euro, z.B. heute.", "Nr. 5 ist frei."],
        ),
        (None, "Das ist z.B. gut. Ja.", ["Das ist z.B. gut.", "Ja."]),
        ("german", "Wir treffen uns am 3. Mai. Gut.", ["Wir treffen uns am 3. Mai.", "Gut."]),
        (None, "Wir treffen uns am 3. Mai. Gut.", ["Wir treffen uns am 3. Mai.", "Gut."]),
        (
            "english",
            "See Fig. 3 for details. I counted to 3. Then I left.",
            ["See Fig. 3 for details.", "I counted to 3.", "Then I left."],
        ),
        ("spanish", "Estamos bien. Gracias.", ["Estamos bien.", "Gracias."]),
        ("french", "M. Dupont est arrivé. Il est parti.", ["M. Dupont est arrivé.", "Il est parti."]),
        ("spanish", "El Sr. García llegó. ¿Qué pasa? ¡Nada!", ["El Sr. García llegó.", "¿Qué pasa?", "¡Nada!"]),
        ("portuguese", "O Sr. Silva chegou. Que bom! Tudo bem?", ["O Sr. Silva chegou.", "Que bom!", "Tudo bem?"]),
        ("russian", "Это, т.е. тест. Второе предложение.", ["Это, т.е. тест.", "Второе предложение."]),
        (None, "Это, т.е. тест. Второе предложение.", ["Это, т.е. тест.", "Второе предложение."]),
        ("english", "Wait... what? Yes.", ["Wait... what?", "Yes."]),
        (None, "Wait... what? Yes. Sure… Then go.", ["Wait... what?", "Yes.", "Sure…", "Then go."]),
        ("english", 'He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        (None, '"Stop!" he said. (It was late.) We left.', ['"Stop!" he said.', "(It was late.)", "We left."]),
        (
            "chinese",
            "你好，我是小明。今天天气很好！你呢？好的",
            ["你好，我是小明。", "今天天气很好！", "你呢？", "好的"],
        ),
        (None, "你好，我是小明。今天天气很好！你呢？好的", ["你好，我是小明。", "今天天气很好！", "你呢？", "好的"]),
        ("chinese", "他说：“你好。”然后走了。", ["他说：“你好。”", "然后走了。"]),
        ("japanese", "「行こう。」と言った。はい！", ["「行こう。」と言った。", "はい！"]),
        (None, "「行こう。」と言った。はい！", ["「行こう。」と言った。", "はい！"]),
        ("korean", "안녕하세요. 저는 민수입니다! 반가워요?", ["안녕하세요.", "저는 민수입니다!", "반가워요?"]),
        ("english", "I love it 😀. You too? 🎉 Yes", ["I love it 😀.", "You too?", "🎉 Yes"]),
        (None, "Great job! 🎉🎉! Next one.", ["Great job!", "🎉🎉! Next one."]),
        (None, "no punctuation at all here", ["no punctuation at all here"]),
        ("english", "  leading and trailing space.  ", ["leading and trailing space."]),
        (None, "Title\n\nFirst line\nsecond line.", ["Title", "First line", "second line."]),
        (None, "1. First item here. 2. Second.", ["1. First item here.", "2. Second."]),
        ("english", "", []),
        (None, " \n ", []),
    ],
)
def test_split_sentences(language, text, sentences):
    assert split_sentences(text, language) == sentences


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("punctuated", [True, False])
def test_a_4096_character_paragraph_fits_max_chars_and_loses_nothing(language, punctuated):
    text = paragraph(4096, punctuated)
    segments = speech_segments(text, language)
    assert all(0 < len(segment) <= 300 for segment in segments)
    assert words(" ".join(segments)) == words(text)
    assert visible("".join(split_sentences(text, language))) == visible(text)
    segments, rest = incremental([text[i : i + 3] for i in range(0, len(text), 3)], language=language)
    assert all(0 < len(segment) <= 300 for segment in [*segments, rest])
    assert words(" ".join([*segments, rest])) == words(text)


def test_short_sentences_merge_up_to_max_chars():
    text = "One. Two. Three. Four. Five. Six."
    assert speech_segments(text, "english", max_chars=15) == ["One. Two.", "Three. Four.", "Five. Six."]
    assert speech_segments(text, "english") == [text]


@pytest.mark.parametrize(
    "language, text, max_chars, segments",
    [
        (
            "english",
            "We went to the market, bought bread and cheese; then, tired — very tired, we walked home.",
            40,
            ["We went to the market,", "bought bread and cheese; then, tired —", "very tired, we walked home."],
        ),
        (
            "chinese",
            "今天天气很好，我们去公园散步吧；你觉得怎么样？",
            10,
            ["今天天气很好，", "我们去公园散步吧；", "你觉得怎么样？"],
        ),
        ("chinese", "今天天气很好我们去公园散步吧", 6, ["今天天气很好", "我们去公园散", "步吧"]),
        ("korean", "오늘은 날씨가 정말 좋아서 공원에 갔어요", 12, ["오늘은 날씨가 정말", "좋아서 공원에 갔어요"]),
        (
            None,
            "alpha beta gamma delta epsilon zeta eta theta",
            12,
            ["alpha beta", "gamma delta", "epsilon zeta", "eta theta"],
        ),
        (None, "x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5]),
        (None, "Pay 1,234.5 now, ok", 12, ["Pay 1,234.5", "now, ok"]),
    ],
)
def test_long_sentences_split_at_clauses_then_words(language, text, max_chars, segments):
    assert speech_segments(text, language, max_chars) == segments


# -- the incremental segmenter -------------------------------------------------------------------------------


def test_a_sentence_completes_once_whitespace_follows():
    segmenter = IncrementalSegmenter()
    assert segmenter.feed("The weather is lovely today.") == []  # could still be "today.5"
    assert segmenter.feed(" Let") == ["The weather is lovely today."]
    assert segmenter.flush() == "Let"
    assert segmenter.flush() == ""


def test_a_cjk_mark_needs_no_space_and_flush_settles_the_end():
    segmenter = IncrementalSegmenter()
    assert segmenter.feed("你好，我是小明。") == []  # a closing quote could still follow
    assert segmenter.feed("今天") == ["你好，我是小明。"]
    assert segmenter.feed("天气很好！") == []
    assert segmenter.flush() == "今天天气很好！"


def test_token_by_token_equals_all_at_once():
    text = "Well, I think so. It costs 3.14 dollars; that is cheap! Is it? Yes: absolutely, my friend."
    tokens = [text[i : i + 3] for i in range(0, len(text), 3)]
    assert incremental(tokens) == incremental([text])
    assert incremental([text]) == (
        ["Well, I think so.", "It costs 3.14 dollars;", "that is cheap!", "Is it?", "Yes: absolutely,"],
        "my friend.",
    )


@pytest.mark.parametrize(
    "pieces, segments, rest",
    [
        (["It is 3.", "14 today and then some more"], [], "It is 3.14 today and then some more"),
        (["Pay 1,000 dollars", " or more"], [], "Pay 1,000 dollars or more"),
        (["Dr. Smith will see you now. Then leave"], ["Dr. Smith will see you now."], "Then leave"),
        (["Call Dr.", " Smith at 3 p.m.", " today. Ok"], ["Call Dr. Smith at 3 p.m. today."], "Ok"),
        (["We met at 3 p.m. ", "Then we left"], ["We met at 3 p.m."], "Then we left"),
        (["Fruit, etc. ", "and more"], [], "Fruit, etc. and more"),
        (["Written by J. K. Rowling, the author"], ["Written by J. K. Rowling,"], "the author"),
        (["1. First, the long item here. Next"], ["1. First, the long item here."], "Next"),
        (['He said "stop right there." Then', " ran"], ['He said "stop right there."'], "Then ran"),
        (["Wait... what happened here? Nothing"], ["Wait... what happened here?"], "Nothing"),
        (["Hi. ", "Ok, fine."], ["Hi."], "Ok, fine."),
        (["Hi there, my friend. Then"], ["Hi there, my friend."], "Then"),
        (["Good morning to you, and welcome back."], ["Good morning to you,"], "and welcome back."),
        (["Title line\nBody"], ["Title line"], "Body"),
        (["「行こう。」と言った。", "はい"], ["「行こう。」と言った。"], "はい"),
    ],
)
def test_numbers_abbreviations_and_short_clauses_do_not_split(pieces, segments, rest):
    assert incremental(pieces) == (segments, rest)


def test_a_smaller_minimum_releases_clauses_sooner():
    assert incremental(["Hi, you. There"], min_chars=2) == (["Hi,", "you."], "There")


def test_a_run_with_no_boundary_is_released_at_max_chars():
    segments, rest = incremental(["word " * 30], max_chars=22)
    assert segments == ["word word word word"] * 7 and rest == "word word"


# -- properties ----------------------------------------------------------------------------------------------

TOKENS = [
    "Hello", "world", "dr", "Dr.", "Mr.", "e.g.", "etc.", "U.S.A.", "p.m.", "z.B.", "т.е.", "Sr.", "J.", "3.14",
    "1,234.5", "1.234,5", "42", "ok", "Then", "über", "你好", "今天天气", "こんにちは", "안녕하세요", "привет", "😀",
    "👍🏽", ".", "!", "?", "...", "…", ",", ";", ":", "—", "。", "！", "？", "，", "、", "\"", "”", "」", ")", "(",
    "«", "»", "「", " ", " ", " ", "  ", "\n", "\t",
]  # fmt: skip
texts = st.one_of(st.lists(st.sampled_from(TOKENS), max_size=80).map("".join), st.text(max_size=200))


def check_segments(segments: list[str], text: str, max_chars: int) -> None:
    assert all(segment and segment == segment.strip() and len(segment) <= max_chars for segment in segments)
    assert visible("".join(segments)) == visible(text)
    if all(len(word) <= max_chars for word in words(text)):
        assert words(" ".join(segments)) == words(text)


@settings(max_examples=300, deadline=None)
@given(text=texts, language=st.sampled_from(LANGUAGES), max_chars=st.integers(8, 120))
def test_speech_segments_lose_nothing_and_fit(text, language, max_chars):
    check_segments(speech_segments(text, language, max_chars), text, max_chars)


@settings(max_examples=300, deadline=None)
@given(text=texts, language=st.sampled_from(LANGUAGES))
def test_sentences_lose_nothing(text, language):
    sentences = split_sentences(text, language)
    assert all(sentence and sentence == sentence.strip() for sentence in sentences)
    assert visible("".join(sentences)) == visible(text)
    assert words(" ".join(sentences)) == words(text)


@settings(max_examples=300, deadline=None)
@given(
    text=texts,
    cuts=st.lists(st.integers(0, 200), max_size=20),
    language=st.sampled_from(LANGUAGES),
    min_chars=st.integers(1, 30),
    max_chars=st.integers(8, 120),
)
def test_incremental_in_any_pieces_equals_whole_and_loses_nothing(text, cuts, language, min_chars, max_chars):
    bounds = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    options = {"language": language, "min_chars": min_chars, "max_chars": max_chars}
    segments, rest = incremental(pieces, **options)
    assert (segments, rest) == incremental([text], **options)
    check_segments([*segments, rest] if rest else segments, text, max_chars)
