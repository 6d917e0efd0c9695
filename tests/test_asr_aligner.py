"""The forced aligner gives the official word timestamps (tests/fixtures/asr): its words, its prompt ids, the step
at every timestamp slot from the official features, and the official repair of those steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from asr_cases import ALIGN_CASES, ASR_CHECKPOINTS, ASR_FIXTURE_DIR, REPAIR_CASES
from qwen3_tts_server.errors import InvalidInputError
from qwen3_tts_server.model.asr.aligner import (
    aligner_prompt,
    alignment_words,
    repair_timestamps,
    slot_steps,
    timed_words,
)
from qwen3_tts_server.model.asr.decoder import AsrDecoder
from qwen3_tts_server.model.asr.encoder import AudioEncoder, AudioEncoderConfig
from qwen3_tts_server.model.text_tokenizer import TextTokenizer
from qwen3_tts_server.testing.random_asr_checkpoint import asr_token_id, make_asr_test_model

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))
FEATURES = np.load(ASR_FIXTURE_DIR / "features.npz")
KIND = "forced_aligner"


@pytest.fixture(scope="module")
def aligner(tmp_path_factory):
    directory = make_asr_test_model(tmp_path_factory.mktemp("aligner") / KIND, **ASR_CHECKPOINTS[KIND])
    config = json.loads((directory / "config.json").read_text())
    encoder = AudioEncoder(AudioEncoderConfig.parse(config["thinker_config"]["audio_config"]))
    decoder = AsrDecoder(config["thinker_config"]["text_config"])
    weights = load_file(directory / "model.safetensors")
    for module, prefix in ((encoder, "thinker.audio_tower."), (decoder, "thinker.model.")):
        module.load_state_dict({k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)})
    head = torch.nn.Linear(decoder.cfg.hidden_size, len(weights["thinker.lm_head.weight"]), bias=False)
    head.load_state_dict({"weight": weights["thinker.lm_head.weight"]})
    return encoder.eval(), decoder.eval(), head, TextTokenizer.from_directory(directory)


@pytest.mark.parametrize("case", ALIGN_CASES)
def test_the_aligner_gives_the_official_timestamps(aligner, case):
    encoder, decoder, head, tokenizer = aligner
    spec, recorded = ALIGN_CASES[case], ORACLE["align"][case]
    words = alignment_words(spec["text"], spec["language"])
    assert words == [item["text"] for item in recorded["items"]]
    with torch.inference_mode():
        audio = encoder(torch.from_numpy(FEATURES[spec["audio"]].copy()))
    ids = torch.tensor(tokenizer.encode(aligner_prompt(words, len(audio))))
    assert ids.tolist() == recorded["input_ids"][0]
    embedded = decoder.embed_prompt(ids, audio, asr_token_id("<|audio_pad|>", KIND))
    steps = slot_steps(decoder, head, embedded, ids, asr_token_id("<timestamp>", KIND))
    assert steps == recorded["slot_classes"]
    assert timed_words(words, steps, 80) == [(i["text"], i["start"], i["end"]) for i in recorded["items"]]


def test_words_keep_letters_digits_and_apostrophes_and_split_ideographs():
    assert alignment_words("Don't stop-me now, 3.5 times!") == ["Don't", "stopme", "now", "35", "times"]
    assert alignment_words("漢字とカナ mixed中文text") == ["漢", "字", "とカナ", "mixed", "中", "文", "text"]
    with pytest.raises(InvalidInputError, match="Japanese"):
        alignment_words("こんにちは", "Japanese")


@pytest.mark.parametrize(("raw", "official"), list(zip(REPAIR_CASES, ORACLE["align"]["repair"], strict=True)))
def test_timestamps_are_repaired_as_the_official_aligner_repairs_them(raw, official):
    assert repair_timestamps(raw) == official
