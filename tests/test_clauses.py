"""The incremental clause splitter behind the WebSocket's early start."""

from __future__ import annotations

import pytest

from qwen3_tts_server.text.clauses import ClauseSplitter, width


def split_pieces(pieces: list[str]) -> tuple[list[str], str]:
    splitter = ClauseSplitter()
    clauses = [clause for piece in pieces for clause in splitter.feed(piece)]
    return clauses, splitter.flush()


def test_a_clause_completes_only_once_the_next_character_arrives():
    splitter = ClauseSplitter()
    assert splitter.feed("The weather is lovely today.") == []  # could still be "today.5"
    assert splitter.feed(" Let") == ["The weather is lovely today."]
    assert splitter.pending == " Let"
    assert splitter.flush() == "Let" and splitter.pending == ""


def test_token_by_token_equals_all_at_once():
    text = "Well, I think so. It costs 3.14 dollars; that is cheap! Is it? Yes: absolutely, my friend."
    tokens = [text[i : i + 3] for i in range(0, len(text), 3)]
    assert split_pieces(tokens) == split_pieces([text])
    assert split_pieces([text]) == (
        ["Well, I think so.", "It costs 3.14 dollars;", "that is cheap!", "Is it? Yes: absolutely,"],
        "my friend.",
    )


@pytest.mark.parametrize(
    "pieces, clauses, rest",
    [
        (["It is 3.", "14 today and then some more"], [], "It is 3.14 today and then some more"),
        (["Pay 1,000 dollars", " or more"], [], "Pay 1,000 dollars or more"),
        (["Dr. Smith will see you now. Then leave"], ["Dr. Smith will see you now."], "Then leave"),
        (["Please call Dr. Smith tomorrow. Ok"], ["Please call Dr. Smith tomorrow."], "Ok"),
        (["Written by J. K. Rowling, the author"], ["Written by J. K. Rowling,"], "the author"),
        (["1. First, the long item here. Next"], ["1. First, the long item here."], "Next"),
        (['He said "stop right there." Then', " ran"], ['He said "stop right there."'], "Then ran"),
        (["Wait... what happened here? Nothing"], ["Wait... what happened here?"], "Nothing"),
    ],
)
def test_numbers_abbreviations_and_short_pieces_do_not_split(pieces, clauses, rest):
    assert split_pieces(pieces) == (clauses, rest)


def test_cjk_punctuation_splits_without_spaces():
    assert split_pieces(["你好，我是小明。今天", "天气很好！"]) == (["你好，我是小明。"], "今天天气很好！")
    assert width("你好") == 4 and width("ab") == 2


def test_a_smaller_minimum_splits_sooner():
    splitter = ClauseSplitter(min_width=2)
    assert splitter.feed("Hi, you. There") == ["Hi,", "you."]
