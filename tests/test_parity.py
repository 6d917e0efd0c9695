"""Our model against the official qwen-tts 0.1.1 outputs recorded in tests/fixtures/parity
(tools/make_parity_fixtures.py): identical greedy codes, codec waveforms within 1e-4, identical token ids."""

from __future__ import annotations

import json

import numpy as np
import pytest

from parity_cases import (
    CODEC_LENGTHS,
    CODEC_SEED,
    CUSTOM_VOICE_BATCHES,
    FIXTURE_DIR,
    MAX_FRAMES,
    TOKENIZER_CORPUS,
    VOICE_DESIGN_BATCHES,
    checkpoint_digest,
    random_codes,
)
from qwen3_tts_server.model.tts.prompt import SpeechInput

OFFICIAL = json.loads((FIXTURE_DIR / "official.json").read_text(encoding="utf-8"))
BATCHES = {
    **{k: ("custom_voice", v) for k, v in CUSTOM_VOICE_BATCHES.items()},
    **{k: ("voice_design", v) for k, v in VOICE_DESIGN_BATCHES.items()},
}


def _request(case: dict) -> SpeechInput:
    return SpeechInput(
        text=case["text"],
        language=case.get("language", "auto"),
        speaker=case.get("speaker"),
        instruct=case.get("instruct"),
        whole_text=case.get("whole_text", True),
    )


def _greedy_codes(model, batch: list[dict]) -> list[list[list[int]]]:
    params = model.sampling(repetition_penalty=batch[0].get("repetition_penalty")).greedy()
    results = model.generate([_request(case) for case in batch], params, max_frames=MAX_FRAMES)
    return [r.codes.tolist() for r in results]


@pytest.mark.parametrize("name", ["custom_voice", "voice_design"])
def test_checkpoint_bytes_match_the_fixtures(checkpoint_dirs, name):
    expected = OFFICIAL["checkpoints"][name]["sha256"]
    assert checkpoint_digest(checkpoint_dirs[name]) == expected, (
        "make-test-model no longer builds the checkpoint the fixtures were recorded on; "
        "rerun tools/make_parity_fixtures.py in the oracle environment"
    )


@pytest.mark.parametrize("label", list(BATCHES))
def test_greedy_codes_identical_to_official(models, label):
    kind, batch = BATCHES[label]
    assert _greedy_codes(models[kind], batch) == OFFICIAL["codes"][label]


def test_fixtures_cover_eos_and_frame_budget():
    lengths = [len(codes) for batch in OFFICIAL["codes"].values() for codes in batch]
    assert any(n < MAX_FRAMES for n in lengths) and any(n == MAX_FRAMES for n in lengths)


@pytest.mark.parametrize("label", ["cv_batch", "vd_batch"])
def test_batched_rows_identical_to_single_runs(models, label):
    kind, batch = BATCHES[label]
    batched = _greedy_codes(models[kind], batch)
    singles = [_greedy_codes(models[kind], [case])[0] for case in batch]
    assert batched == singles


def test_batch_rows_finish_at_different_frames(models):
    lengths = [len(codes) for codes in _greedy_codes(models["custom_voice"], CUSTOM_VOICE_BATCHES["cv_batch"])]
    assert len(set(lengths)) > 1 and max(lengths) == MAX_FRAMES


@pytest.mark.parametrize("frames", CODEC_LENGTHS)
def test_codec_waveform_matches_official(models, frames):
    expected = np.load(FIXTURE_DIR / "waveforms.npz")[f"frames_{frames}"]
    ours = models["custom_voice"].decode(random_codes(frames, CODEC_SEED))
    assert ours.shape == expected.shape == (frames * 1920,)
    assert np.abs(ours - expected).max() <= 1e-4
    assert np.sqrt(np.mean(expected**2)) > 0.01, "the random codec should make audible noise"


def test_tokenizer_ids_identical_to_official(models):
    tokenizer = models["custom_voice"].tokenizer
    assert [tokenizer.encode(text) for text in TOKENIZER_CORPUS] == OFFICIAL["tokenizer"]
