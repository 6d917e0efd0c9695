"""Encoder and decoder together give the official greedy transcription token for token (tests/fixtures/asr): the
official features encoded, placed in the official prompt, decoded greedily, for the prompts with and without a
context and a forced language."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from asr_cases import ASR_CHECKPOINTS, ASR_FIXTURE_DIR, MAX_NEW_TOKENS, TRANSCRIBE_CASES
from qwen3_tts_server.model.asr.decoder import AsrDecoder
from qwen3_tts_server.model.asr.decoding import GreedyRows
from qwen3_tts_server.model.asr.encoder import AudioEncoder, AudioEncoderConfig
from qwen3_tts_server.testing.random_asr_checkpoint import asr_token_id, make_asr_test_model

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))
FEATURES = np.load(ASR_FIXTURE_DIR / "features.npz")
PAD, END = asr_token_id("<|endoftext|>"), asr_token_id("<|im_end|>")


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> tuple[AudioEncoder, AsrDecoder]:
    return tiny_parts(tmp_path_factory)


def tiny_parts(tmp_path_factory) -> tuple[AudioEncoder, AsrDecoder]:
    """The tiny transcriber's encoder and decoder, loaded from a checkpoint built for the module."""
    directory = make_asr_test_model(tmp_path_factory.mktemp("asr") / "asr", **ASR_CHECKPOINTS["asr"])
    config = json.loads((directory / "config.json").read_text())["thinker_config"]
    encoder = AudioEncoder(AudioEncoderConfig.parse(config["audio_config"]))
    decoder = AsrDecoder(config["text_config"])
    weights = load_file(directory / "model.safetensors")
    for module, prefix in ((encoder, "thinker.audio_tower."), (decoder, "thinker.model.")):
        module.load_state_dict({k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)})
    return encoder.eval(), decoder.eval()


# The batch's first row is its longest clip, whose features are those it has alone; a shorter row's are not (the
# official batch pads it: docs/asr_reference.md, section c). The long clip's features are not kept (10 MB): its
# tokens are checked from its audio (test_asr_transcriber.py).
ROWS = [(case, 0) for case, items in TRANSCRIBE_CASES.items() if items[0]["audio"] in FEATURES.files]


@pytest.mark.parametrize(("case", "row"), ROWS)
def test_greedy_decoding_gives_the_official_tokens(parts, case, row):
    encoder, decoder = parts
    recorded = ORACLE["transcribe"]["asr"][case]
    prompt = recorded["input_ids"][row]
    prompt = torch.tensor(prompt[next(i for i, token in enumerate(prompt) if token != PAD) :])
    with torch.inference_mode():
        audio = encoder(torch.from_numpy(FEATURES[TRANSCRIBE_CASES[case][row]["audio"]].copy()))
        embedded = decoder.embed_prompt(prompt, audio, asr_token_id("<|audio_pad|>"))
    rows = GreedyRows(decoder, lambda hidden: hidden @ decoder.embed_tokens.weight.T, frozenset({END, PAD}), 1)
    _, (first,) = rows.join(embedded, MAX_NEW_TOKENS)
    tokens = [first.token]
    while rows.rows:
        tokens += [emitted.token for emitted in rows.step()]
    official = recorded["generated_ids"][row]
    assert tokens == official[: len(tokens)] and all(token == END for token in official[len(tokens) :])


def test_a_prompt_must_hold_one_placeholder_per_audio_row(parts):
    _, decoder = parts
    ids = torch.tensor([1, asr_token_id("<|audio_pad|>"), 2])
    with pytest.raises(ValueError, match="1 audio placeholders for 2 audio rows"):
        decoder.embed_prompt(ids, torch.zeros(2, 64), asr_token_id("<|audio_pad|>"))


def case_prompt(parts, case: str) -> torch.Tensor:
    encoder, decoder = parts
    prompt = ORACLE["transcribe"]["asr"][case]["input_ids"][0]
    prompt = torch.tensor(prompt[next(i for i, token in enumerate(prompt) if token != PAD) :])
    with torch.inference_mode():
        audio = encoder(torch.from_numpy(FEATURES[TRANSCRIBE_CASES[case][0]["audio"]].copy()))
        return decoder.embed_prompt(prompt, audio, asr_token_id("<|audio_pad|>"))


def decode(rows: GreedyRows, joins: list[tuple[float, int | None]], prompt: torch.Tensor, budget: int) -> list:
    """Rows joined at once (temperature, seed each), decoded to the end: each row's (token, logprob) pairs."""
    got = {}
    for temperature, seed in joins:
        row, (first,) = rows.join(prompt, budget, temperature, seed)
        got[row] = [(first.token, first.logprob)]
    while rows.rows:
        for emitted in rows.step():
            got[emitted.row].append((emitted.token, emitted.logprob))
    return [got[row] for row in sorted(got)]


def test_sampled_rows_follow_their_seed_whatever_their_neighbours_and_every_token_has_its_log_probability(parts):
    _, decoder = parts
    prompt = case_prompt(parts, ROWS[0][0])

    def head(hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ decoder.embed_tokens.weight.T

    def rows(slots: int) -> GreedyRows:
        return GreedyRows(decoder, head, frozenset({END, PAD}), slots)

    greedy, sampled, again = decode(rows(3), [(0.0, None), (0.9, 5), (0.9, 5)], prompt, 12)
    (alone,) = decode(rows(1), [(0.9, 5)], prompt, 12)
    (other_seed,) = decode(rows(1), [(0.9, 6)], prompt, 12)
    official = ORACLE["transcribe"]["asr"][ROWS[0][0]]["generated_ids"][0]
    assert [token for token, _ in greedy] == official[: len(greedy)]
    tokens = [token for token, _ in sampled]
    assert tokens == [token for token, _ in again] == [token for token, _ in alone] != [t for t, _ in other_seed]
    assert tokens != [token for token, _ in greedy]
    for row in (greedy, sampled):  # each log probability is the model's for that token after the ones before it
        ids = [token for token, _ in row]
        with torch.inference_mode():
            given = decoder.embed_tokens(torch.tensor(ids[:-1])).to(prompt.dtype)
            sequence = torch.cat([prompt, given])
            cache = decoder.new_cache(1, len(sequence), prompt.dtype, prompt.device)
            hidden = decoder.prefill(sequence[None], cache, slice(0, 1))[0, len(prompt) - 1 :]
            expected = torch.log_softmax(head(hidden), dim=-1).gather(1, torch.tensor(ids)[:, None])[:, 0]
        assert [logprob for _, logprob in row] == pytest.approx(expected.tolist(), abs=1e-4)
        assert all(logprob <= 0 for _, logprob in row)


def test_a_negative_temperature_is_refused(parts):
    _, decoder = parts
    rows = GreedyRows(decoder, lambda hidden: hidden @ decoder.embed_tokens.weight.T, frozenset({END}), 1)
    with pytest.raises(ValueError, match="temperature"):
        rows.join(case_prompt(parts, ROWS[0][0]), 4, -0.5)
    assert rows.free_slots == 1


@pytest.mark.parametrize("kind", ["right", "wrong at its fourth token", "wrong at once", "longer than the budget"])
def test_a_draft_changes_no_token_and_gives_its_confirmed_beginning_at_once(parts, kind):
    """A greedy row joined with a draft of its first tokens, beside a row joined without one: both give the tokens
    decoded a step at a time, with their log probabilities; the first call gives the draft's confirmed beginning
    and the token after it, and the rest decodes from a cache that holds exactly those."""
    _, decoder = parts
    prompt = case_prompt(parts, ROWS[0][0])

    def rows(slots: int) -> GreedyRows:
        return GreedyRows(decoder, lambda hidden: hidden @ decoder.embed_tokens.weight.T, frozenset({END, PAD}), slots)

    (plain,) = decode(rows(1), [(0.0, None)], prompt, 12)
    tokens = [token for token, _ in plain]
    assert len(tokens) == 12  # the budget ends it, not a stop token: every draft below is checked in full
    draft, confirmed = {
        "right": (tokens[:6], 6),
        "wrong at its fourth token": (tokens[:3] + [tokens[3] + 1] + tokens[4:6], 3),
        "wrong at once": ([tokens[0] + 1, *tokens[1:5]], 0),
        "longer than the budget": (tokens + [7, 8, 9], 11),  # cut to the budget less the token after it
    }[kind]
    both = rows(2)
    beside, (alone,) = both.join(prompt, 12)
    row, first = both.join(prompt, 12, draft=draft)
    assert [emitted.token for emitted in first] == tokens[: confirmed + 1]
    got = {row: [(emitted.token, emitted.logprob) for emitted in first], beside: [(alone.token, alone.logprob)]}
    while both.rows:
        for emitted in both.step():
            got[emitted.row].append((emitted.token, emitted.logprob))
    for pairs in got.values():
        assert [token for token, _ in pairs] == tokens
        assert [logprob for _, logprob in pairs] == pytest.approx([logprob for _, logprob in plain], abs=1e-4)
