"""The recognition front end gives exactly the official processor's log-mel features (tests/fixtures/asr): a 16 kHz
mono recording, and recordings at 22.05 and 44.1 kHz (stereo) that the official code resamples.

The official features' last bits depend on the CPU (its FFT and vector maths take other code paths on AVX2 and
AVX-512), so each machine kind the tests run on has its recording (features*.npz, tools/make_asr_fixtures.py), and
the features must equal one of them bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_cases import ASR_FIXTURE_DIR, write_asr_clip
from qwen3_tts_server.model.asr.mel import MEL_BINS, log_mel, model_wave

RECORDINGS = [np.load(path) for path in sorted(ASR_FIXTURE_DIR.glob("features*.npz"))]
OFFICIAL = RECORDINGS[0]


@pytest.mark.parametrize("name", OFFICIAL.files)
def test_the_features_are_the_official_ones(name, tmp_path):
    samples, rate = sf.read(write_asr_clip(tmp_path, name), dtype="float32", always_2d=True)
    wave = model_wave(samples, rate)
    features = log_mel(wave).numpy()
    assert features.shape == (MEL_BINS, len(wave) // 160) == OFFICIAL[name].shape
    if not any(np.array_equal(features, recording[name]) for recording in RECORDINGS):
        nearest = min(RECORDINGS, key=lambda recording: np.abs(features - recording[name]).max())
        np.testing.assert_array_equal(
            features,
            nearest[name],
            err_msg=f"no recording matches on this CPU ({torch.backends.cpu.get_cpu_capability()}); if its floats "
            "round unlike any recorded machine's, record the official features here: make_asr_fixtures.py "
            "--features-only",
        )


def test_a_loud_input_is_scaled_to_its_peak_and_silence_has_flat_features():
    loud = model_wave(np.array([0.5, -4.0, 2.0], dtype=np.float32), 16000)
    assert torch.equal(loud, torch.tensor([0.125, -1.0, 0.5]))
    silent = log_mel(torch.zeros(16000))
    assert silent.shape == (MEL_BINS, 100) and torch.all(silent == silent[0, 0])
