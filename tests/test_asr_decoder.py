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
    _, first = rows.join(embedded, MAX_NEW_TOKENS)
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
