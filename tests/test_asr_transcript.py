"""Reading the model's output and cutting long audio, as the official qwen-asr does (tests/fixtures/asr): decoded
outputs to (language, text) with the repetition collapse, per-part languages merged, and long clips cut at the
quiet points it picks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asr_cases import ASR_FIXTURE_DIR, MERGE_CASES, PARSE_CASES, SPLIT_CASES, TRANSCRIBE_CASES, TRANSCRIBERS, split_wave
from qwen3_tts_server.model.asr.long_audio import split_long_audio
from qwen3_tts_server.model.asr.transcript import (
    SettledCollapse,
    collapse_repetitions,
    merge_languages,
    parse_transcript,
)

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("case", "official"), list(zip(PARSE_CASES, ORACLE["parse"], strict=True)))
def test_decoded_outputs_read_as_the_official_parser_reads_them(case, official):
    assert list(parse_transcript(*case)) == official


@pytest.mark.parametrize("name", TRANSCRIBE_CASES)
@pytest.mark.parametrize("transcriber", TRANSCRIBERS)
def test_the_recorded_model_outputs_parse_to_the_official_results(transcriber, name):
    recorded = ORACLE["transcribe"][transcriber][name]
    for item, decoded, parsed in zip(TRANSCRIBE_CASES[name], recorded["decoded"], recorded["parsed"], strict=True):
        assert parse_transcript(decoded, item["language"]) == (parsed["language"], parsed["text"])


def test_repetitions_collapse_as_the_official_quirks_have_it():
    assert collapse_repetitions("x" * 20) == "x" * 20  # not past the run threshold, and under 40 characters
    assert collapse_repetitions("x" * 20 + "y" * 20) == "x" + "y" * 20  # 20 units from where the scan looks
    assert collapse_repetitions("ab" * 19 + "c" * 3) == "ab" * 19 + "ccc"
    assert collapse_repetitions("ab" * 20 + "c" * 40) == "abc"


# Outputs as a looping model writes them: pieces of text, some repeated past the collapse's threshold or just short
# of it, cut into tokens of 1 to 5 characters.
LOOPING = st.lists(
    st.tuples(st.text("ab c.", min_size=1, max_size=4), st.integers(1, 45)) | st.tuples(st.text("abxy .", max_size=30)),
    min_size=1,
    max_size=8,
).map(lambda pieces: "".join(piece[0] * (piece[1] if len(piece) > 1 else 1) for piece in pieces))


@settings(max_examples=300, deadline=None)
@given(LOOPING, st.lists(st.integers(1, 5), min_size=1))
def test_the_settled_collapse_is_never_taken_back(output, cuts):
    """What is settled as the output is decoded only grows, and always begins the whole output's collapse."""
    final = collapse_repetitions(output.strip())
    reader, shown, start = SettledCollapse(), "", 0
    while start < len(output):
        size = cuts[start % len(cuts)]
        reader.feed(output[start : start + size])
        start += size
        settled = reader.settled
        assert final.startswith(settled) and settled.startswith(shown), (output[:start], settled, final)
        shown = settled


def test_ordinary_text_settles_as_it_comes_and_a_loop_shows_once():
    reader = SettledCollapse()
    for piece in ("language English<asr_text>", "Hello", " world", ".", " Say"):
        reader.feed(piece)
    assert reader.settled == "language English<asr_text>Hello world. Say"
    for _ in range(19):  # a unit twice is held past its first: it may become a loop
        reader.feed(" no")
    assert reader.settled == "language English<asr_text>Hello world. Say no"
    reader.feed(" no" * 30 + " more")  # 49 in all: collapsed
    assert reader.settled == "language English<asr_text>Hello world. Say no more"


def test_languages_merge_as_the_official_helper_merges_them():
    assert [merge_languages(languages) for languages in MERGE_CASES] == ORACLE["merge"]


@pytest.mark.parametrize("name", SPLIT_CASES)
def test_long_audio_is_cut_where_the_official_split_cuts_it(name):
    seconds, quiet, longest = SPLIT_CASES[name]
    wave = split_wave(seconds, quiet)
    parts = split_long_audio(wave, 16000, longest)
    assert [
        {"samples": len(part), "offset": offset, "end_sample": int(np.sum(np.abs(part) > 0))} for part, offset in parts
    ] == ORACLE["split"][name]
    starts = [round(offset * 16000) for _, offset in parts]
    unpadded = [wave[start:end] for start, end in zip(starts, [*starts[1:], len(wave)], strict=True)]
    for (part, _), original in zip(parts, unpadded, strict=True):  # each part is its stretch, padded with silence
        assert np.array_equal(part[: len(original)], original) and not np.any(part[len(original) :])
