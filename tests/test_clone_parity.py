"""Voice cloning against the official qwen-tts 0.1.1 (tests/fixtures/parity, tools/make_parity_fixtures.py):
the same reference files give the same 24 kHz samples, speaker embeddings within 1e-4, identical encoder
codes, identical greedy codes in both modes (single and batched), and the same in-context waveform."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from parity_cases import CLONE_BATCHES, FIXTURE_DIR, MAX_FRAMES, REF_TEXT, REFERENCES, write_reference
from qwen3_tts_server.audio.reference import load_reference
from qwen3_tts_server.model.tts.prompt import SpeechInput

OFFICIAL = json.loads((FIXTURE_DIR / "official.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("references")
    return {name: load_reference(write_reference(folder, name).read_bytes()) for name in REFERENCES}


@pytest.fixture(scope="module")
def voices(models, references) -> dict:
    base = models["base"]
    return {
        (name, x_vector_only): base.voice_encoder.encode(references[name], REF_TEXT[name], x_vector_only=x_vector_only)
        for name in REFERENCES
        for x_vector_only in (False, True)
    }


@pytest.mark.parametrize("name", list(REFERENCES))
def test_reference_samples_identical_to_official(references, name):
    expected = OFFICIAL["references"][name]
    samples = references[name].samples
    assert len(samples) == expected["samples"]
    assert hashlib.sha256(samples.tobytes()).hexdigest() == expected["samples_sha256"]


@pytest.mark.parametrize("name", list(REFERENCES))
def test_speaker_embedding_and_codes_match_official(voices, name):
    expected = OFFICIAL["references"][name]
    voice = voices[(name, False)]
    error = np.abs(voice.speaker_embedding.numpy() - np.array(expected["speaker_embedding"])).max()
    assert error <= 1e-4
    assert voice.ref_codes.tolist() == expected["codes"]
    assert voices[(name, True)].ref_codes is None


def _clone_codes(model, voices, batch: list[dict]) -> list[list[list[int]]]:
    requests = [
        SpeechInput(
            text=case["text"],
            language=case["language"],
            voice=voices[(case["ref"], case.get("x_vector_only", False))],
            whole_text=case.get("whole_text"),
        )
        for case in batch
    ]
    return [r.codes.tolist() for r in model.generate(requests, model.sampling().greedy(), max_frames=MAX_FRAMES)]


@pytest.mark.parametrize("label", list(CLONE_BATCHES))
def test_clone_greedy_codes_identical_to_official(models, voices, label):
    assert _clone_codes(models["base"], voices, CLONE_BATCHES[label]) == OFFICIAL["codes"][label]


def test_clone_batch_rows_identical_to_single_runs(models, voices):
    batch = CLONE_BATCHES["clone_batch"]
    singles = [_clone_codes(models["base"], voices, [case])[0] for case in batch]
    assert _clone_codes(models["base"], voices, batch) == singles


def test_in_context_clone_waveform_matches_official(models, voices):
    model = models["base"]
    case = CLONE_BATCHES["clone_icl_english"][0]
    voice = voices[(case["ref"], False)]
    codes = np.array(OFFICIAL["codes"]["clone_icl_english"][0])
    audio = model.decode(codes, context=voice.ref_codes)
    expected = np.load(FIXTURE_DIR / "waveforms.npz")["clone_icl_english"]
    assert audio.shape == expected.shape == (len(codes) * 1920,)
    assert np.abs(audio - expected).max() <= 1e-4
