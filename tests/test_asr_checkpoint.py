"""Random-weight Qwen3-ASR and ForcedAligner checkpoints (`make-test-model --type asr|forced_aligner`): the official
qwen-asr loader takes their weights as they are, the same seed gives the same bytes, and their tokenizer gives the
ids the official processor gives for the official prompts (tests/fixtures/asr, tools/make_asr_fixtures.py)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from asr_cases import ALIGN_CASES, ASR_CHECKPOINTS, ASR_FIXTURE_DIR, TRANSCRIBE_CASES
from qwen3_tts_server.cli import main as cli_main
from qwen3_tts_server.model.asr.transcriber import prompt_text
from qwen3_tts_server.model.text_tokenizer import TextTokenizer
from qwen3_tts_server.testing.random_asr_checkpoint import asr_token_id, make_asr_test_model

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))
AUDIO_PAD = "<|audio_pad|>"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("asr")
    return {name: make_asr_test_model(root / name, **spec) for name, spec in ASR_CHECKPOINTS.items()}


@pytest.mark.parametrize("name", ASR_CHECKPOINTS)
def test_the_official_loader_takes_the_weights_and_the_same_seed_gives_the_same_bytes(checkpoints, name, tmp_path):
    recorded = ORACLE["checkpoints"][name]
    assert recorded["loader"] == {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": [], "error_msgs": []}
    weights = (checkpoints[name] / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() == recorded["sha256"]  # the bytes the official loader was shown
    other = make_asr_test_model(tmp_path / "other", **{**ASR_CHECKPOINTS[name], "seed": 7})
    assert (other / "model.safetensors").read_bytes() != weights


def unpadded(row: list[int]) -> list[int]:
    """A prompt without the official processor's left padding."""
    pad = asr_token_id("<|endoftext|>")
    return row[next(i for i, token in enumerate(row) if token != pad) :]


@pytest.mark.parametrize("case", TRANSCRIBE_CASES)
def test_the_tokenizer_gives_the_official_prompt_ids(checkpoints, case):
    tokenizer = TextTokenizer.from_directory(checkpoints["asr"])
    recorded = ORACLE["transcribe"]["asr"][case]
    for item, row in zip(TRANSCRIBE_CASES[case], recorded["input_ids"], strict=True):
        ids = unpadded(row)
        prompt = prompt_text(item["context"], item["language"], ids.count(asr_token_id(AUDIO_PAD)))
        assert tokenizer.encode(prompt) == ids


@pytest.mark.parametrize("case", ALIGN_CASES)
def test_the_aligner_tokenizer_gives_the_official_ids(checkpoints, case):
    tokenizer = TextTokenizer.from_directory(checkpoints["forced_aligner"])
    ids = unpadded(ORACLE["align"][case]["input_ids"][0])
    words = [item["text"] for item in ORACLE["align"][case]["items"]]
    assert "".join(words) == re.sub(r"[^\w']", "", ALIGN_CASES[case]["text"])  # punctuation dropped
    audio = AUDIO_PAD * ids.count(asr_token_id(AUDIO_PAD, "forced_aligner"))
    slots = "<timestamp><timestamp>"
    prompt = f"<|audio_start|>{audio}<|audio_end|>" + slots.join(words) + slots
    assert tokenizer.encode(prompt) == ids
    assert ids.count(asr_token_id("<timestamp>", "forced_aligner")) == 2 * len(words)
    assert len(ORACLE["align"][case]["slot_classes"]) == 2 * len(words)


def test_make_test_model_writes_either_kind_and_refuses_a_size_it_does_not_come_in(tmp_path, capsys):
    assert cli_main(["make-test-model", str(tmp_path / "asr"), "--type", "asr", "--seed", "0"]) == 0
    config = json.loads((tmp_path / "asr" / "config.json").read_text())
    assert config["thinker_config"]["model_type"] == "qwen3_asr_thinker"
    assert cli_main(["make-test-model", str(tmp_path / "big"), "--type", "forced_aligner", "--size", "1.7b"]) == 2
    assert "no '1.7b' forced_aligner checkpoint; sizes: tiny, 0.6b" in capsys.readouterr().err


def test_ids_decoded_one_at_a_time_join_to_the_whole_decode(checkpoints):
    """Multi-byte characters split over tokens, special tokens skipped, the `<asr_text>` tag kept: the steps give
    nothing for half a character and together the text that decoding every id at once gives."""
    tokenizer = TextTokenizer.from_directory(checkpoints["asr"])
    text = "language Japanese<asr_text>東京は晴れ 🌤️, naïve café. 한국어"
    ids = tokenizer.encode(text) + [asr_token_id("<|im_end|>")]
    decoder = tokenizer.stream_decoder(skip_special=True)
    steps = [decoder.step(token) for token in ids]
    assert "".join(steps) == tokenizer.decode(ids, skip_special=True) == text
    assert "" in steps and "\ufffd" not in "".join(steps)  # some character took more than one token
