"""Live recognition (model/asr/streaming.py) on the tiny transcriber: the incremental passes give, pass by pass, what
recomputing everything at every pass gives (the official streaming algorithm, all audio re-fed), for speech-like
audio, audio that grows louder (the log-mel floor moves and earlier blocks change), silence, a forced language with
a context, and odd feed sizes; a finished block is encoded once, an unchanged second of the open block convolved
once, and the decoder prefills only what follows the finished blocks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from qwen3_tts_server.model.asr.decoding import GreedyRows
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.streaming import (
    IncrementalPasses,
    LiveUtterance,
    PromptHead,
    RecomputedPasses,
    StreamingSettings,
    text_prefix,
)
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.testing.signals import voiced_glide

SETTINGS = StreamingSettings(max_new_tokens=10)  # the random model never stops: each pass spends its budget


@pytest.fixture(scope="module")
def transcriber(both_families) -> Transcriber:
    return Transcriber(load_asr_checkpoint(both_families["asr"]))


def streamed(transcriber, passes, wave: np.ndarray, feed: int) -> tuple[list[tuple[str, str, str]], list[int]]:
    """After every pass: (output, language, text), and how many prompt positions the decoder had run by then."""
    utterance = LiveUtterance(transcriber, passes, SETTINGS)
    seen, prefilled = [], []
    for start in range(0, len(wave), feed):
        if utterance.feed(wave[start : start + feed]):
            seen.append((utterance.output, utterance.heard_language, utterance.text))
            prefilled.append(getattr(passes, "prefilled", 0))
    utterance.finish()
    seen.append((utterance.output, utterance.heard_language, utterance.text))
    return seen, prefilled


class Counted(Transcriber):
    """The transcriber, keeping the decoding rows it makes (how much of their drafts they confirmed)."""

    def __init__(self, model):
        super().__init__(model)
        self.made: list[GreedyRows] = []

    def rows(self, slots: int) -> GreedyRows:
        self.made.append(super().rows(slots))
        return self.made[-1]


def louder_later(seconds: float) -> np.ndarray:
    wave = voiced_glide(seconds, pitch=150.0)
    wave[len(wave) // 2 :] *= 1.8  # past 10.5 s: the loudest frame, and so the floor, moves up
    return wave


@pytest.mark.parametrize(
    ("wave", "feed", "language", "context", "confirms"),
    [
        (louder_later(21.0), 5920, None, "", True),  # 0.37 s feeds: at most one pass each
        (np.zeros(5 * 16000, np.float32), 16000, None, "", True),
        (voiced_glide(9.3, pitch=120.0), 3001, "English", "Qwen, Wyoming", False),  # none confirmed here
    ],
    ids=["louder-later", "silence", "forced-language"],
)
def test_incremental_passes_give_what_recomputing_everything_gives(
    transcriber, wave, feed, language, context, confirms
):
    """The incremental passes also join with their drafts (the pass before's unfixed tokens): what they confirm is
    taken from the prefill, where recomputing decodes every token a step at a time."""
    counted = Counted(transcriber.model)
    incremental = IncrementalPasses(counted, context, language)
    expected, _ = streamed(transcriber, RecomputedPasses(transcriber, context, language), wave, feed)
    got, _ = streamed(counted, incremental, wave, feed)
    assert len(got) == len(expected) == int(np.ceil(len(wave) / 32000))
    assert got == expected
    assert any(text for _, _, text in got) or not wave.any()
    assert sum(rows.drafted for rows in counted.made) > 0
    assert sum(rows.confirmed for rows in counted.made) > 0 or not confirms


def test_a_finished_block_is_encoded_once_and_prefilled_once(transcriber):
    """21 s of steady speech in 2 s chunks: 11 passes. Recomputing encodes 21 blocks (1, 1, 1, 1, 2, 2, 2, 2, 3, 3,
    3); the incremental passes encode 13: the open block each pass, and a block once more when it is finished (its
    last frames' windows then lie within the audio: the pass at 10 s for the first block, at 18 s for the second)."""
    wave = voiced_glide(21.0, pitch=150.0)
    incremental = IncrementalPasses(transcriber)
    expected, _ = streamed(transcriber, RecomputedPasses(transcriber), wave, 32000)
    got, prefilled = streamed(transcriber, incremental, wave, 32000)
    assert got == expected and incremental.encoded_blocks == 13
    assert incremental.stored_blocks == 2 and len(incremental.blocks) == 2
    per_pass = np.diff(prefilled)
    # after the first block is stored, a pass prefills the open block, the prompt's end and the text prefix only
    whole_prompt = len(transcriber.prompt_ids("", None, 260, got[-2][0]))  # 20 s: 260 audio tokens
    assert per_pass[-1] < whole_prompt - 2 * 104


def test_an_unchanged_second_of_the_open_block_is_convolved_once(transcriber):
    """21 s of a repeated 1 s sound (its loudest frame, and so the log-mel floor, in the first second): 11 passes.
    The first convolves its 2 chunks; each later one 3, the 2 it adds and the one before them, whose last frames'
    windows then lie within the audio; the flush the tail and the chunk before it: 2 + 9 * 3 + 2 = 31 chunks, where
    encoding the open block whole convolves 67 and recomputing everything 131."""
    wave = np.tile(voiced_glide(1.0, pitch=150.0), 21)
    incremental = IncrementalPasses(transcriber)
    expected, _ = streamed(transcriber, RecomputedPasses(transcriber), wave, 32000)
    got, _ = streamed(transcriber, incremental, wave, 32000)
    assert got == expected and incremental.convolved_chunks == 31
    assert sorted(incremental.chunks) == list(range(16, 21))  # the open block's alone


def test_utterances_of_one_context_share_its_prompt_head(transcriber):
    head = PromptHead.compute(transcriber, "Qwen, Wyoming", "English")
    for pitch in (120.0, 160.0):  # two utterances, each from a fresh window, the head computed once for both
        wave = voiced_glide(5.0, pitch=pitch)
        incremental = IncrementalPasses(transcriber, "Qwen, Wyoming", "English", head)
        expected, _ = streamed(transcriber, RecomputedPasses(transcriber, "Qwen, Wyoming", "English"), wave, 32000)
        assert streamed(transcriber, incremental, wave, 32000)[0] == expected and incremental.head is head
    with pytest.raises(ValueError, match="another context or language"):
        IncrementalPasses(transcriber, "", "English", head)
    with pytest.raises(ValueError, match="by another model"):  # a reloaded model's passes: its own head
        IncrementalPasses(Transcriber(transcriber.model), "Qwen, Wyoming", "English", head)


def test_the_text_prefix_leaves_out_the_last_tokens_and_never_splits_a_character(transcriber):
    tokenizer = transcriber.model.tokenizer
    output = "language Chinese<asr_text>今天天气很好，我们去公园散步吧"
    ids = tokenizer.encode(output)
    prefix = text_prefix(transcriber, output, 5, final=False)
    assert output.startswith(prefix) and "\ufffd" not in prefix
    assert len(ids) - 5 - 3 <= len(tokenizer.encode(prefix)) <= len(ids) - 5
    assert text_prefix(transcriber, "", 5, final=False) == "" == text_prefix(transcriber, "", 5, final=True)
    short = tokenizer.decode(ids[:3])
    assert text_prefix(transcriber, short, 5, final=False) == ""  # fewer tokens than are left out
    assert text_prefix(transcriber, short, 5, final=True) == tokenizer.decode(ids[:1])  # the flush keeps one


def test_the_settled_text_begins_every_later_output(transcriber):
    utterance = LiveUtterance(transcriber, IncrementalPasses(transcriber), SETTINGS)
    wave = voiced_glide(9.0, pitch=110.0)
    settled = []
    for start in range(0, len(wave), 32000):
        if utterance.feed(wave[start : start + 32000]):
            assert all(utterance.output.startswith(earlier) for earlier in settled)
            settled.append(utterance.settled)
    utterance.finish()
    assert settled[0] == "" and all(settled[1:]) and utterance.output.startswith(settled[-1])  # from the 2nd pass
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(settled))
