"""The evaluation's scoring (eval/scoring.py) against error rates counted by hand: edits in words or characters
after the same normalisation of both sides, corpus rates over sentences with a resampled interval, and what
nothing heard scores."""

from __future__ import annotations

import pytest

from qwen3_tts_server.eval.scoring import comparable, error_rate, score


@pytest.mark.parametrize(
    ("code", "reference", "hypothesis", "errors", "units"),
    [
        ("en", "The cat sat on the mat.", "the bat sat on mat today", 3, 6),  # a substitution, a deletion, an insertion
        ("en", "It costs $5, thanks!", "It costs five dollars thanks", 0, 5),  # numbers read as words on both sides
        ("de", "Es ist 7 Uhr.", "es ist sieben uhr", 0, 4),
        ("fr", "Bonjour, Marie !", "bonjour marie", 0, 2),
        ("zh", "我爱北京。", "我爱南京", 1, 4),  # characters
        ("ja", "東京へ行きます。", "東京に行きます", 1, 7),
        ("ko", "안녕하세요 여러분", "안녕하세요", 3, 8),  # characters, spaces left out
        ("ru", "У меня 3 кота.", "у меня три кота", 0, 4),
    ],
)
def test_edits_are_counted_in_words_or_characters_after_one_normalisation(code, reference, hypothesis, errors, units):
    scored = score("x-01", code, reference, hypothesis)
    assert (scored.errors, scored.units) == (errors, units)
    assert scored.rate == pytest.approx(errors / units)


def test_both_sides_take_one_form():
    assert comparable("Hello,   World! It's 10%.", "en") == "hello world it's ten percent"
    assert comparable("今天是2024年1月15日。", "zh") == comparable("今天是二零二四年一月十五日", "zh")


def test_nothing_heard_is_every_unit_deleted_and_scores_worse_than_hearing_it():
    silent = score("en-01", "en", "Please call me at noon.", "")
    heard = score("en-01", "en", "Please call me at noon.", "please call me at noon")
    assert (silent.errors, silent.units, silent.rate) == (5, 5, 1.0)
    assert heard.rate == 0.0 < silent.rate


def test_a_corpus_rate_is_every_edit_over_every_unit_with_an_interval_around_it():
    sentences = [
        score("en-01", "en", "one two three four five six", "one two three four five"),  # 1 of 6
        score("en-02", "en", "seven eight nine ten", "seven eight nine ten"),  # 0 of 4
        score("en-03", "en", "a b c d e f g h i j", "a b x d e f g h i"),  # 2 of 10
    ]
    rate = error_rate(sentences)
    assert rate.rate == pytest.approx(3 / 20) and rate.sentences == 3
    assert 0.0 <= rate.low <= rate.rate <= rate.high <= 1.0 and rate.low < rate.high
    assert error_rate(sentences) == rate  # the same resampling each time: identical inputs, identical figures
    with pytest.raises(ValueError):
        error_rate([])


def test_a_sentence_with_nothing_to_compare_is_refused():
    with pytest.raises(ValueError, match="nothing to compare"):
        score("en-01", "en", "?!", "hello")
