"""The recognition front end gives exactly the official processor's log-mel features (tests/fixtures/asr): a 16 kHz
mono recording, and recordings at 22.05 and 44.1 kHz (stereo) that the official code resamples."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_cases import ASR_FIXTURE_DIR, write_asr_clip
from qwen3_tts_server.model.asr.mel import MEL_BINS, log_mel, model_wave

OFFICIAL = np.load(ASR_FIXTURE_DIR / "features.npz")


@pytest.mark.parametrize("name", OFFICIAL.files)
def test_the_features_are_the_official_ones(name, tmp_path):
    samples, rate = sf.read(write_asr_clip(tmp_path, name), dtype="float32", always_2d=True)
    wave = model_wave(samples, rate)
    features = log_mel(wave)
    assert features.shape == (MEL_BINS, len(wave) // 160) == OFFICIAL[name].shape
    np.testing.assert_array_equal(features.numpy(), OFFICIAL[name])


def test_a_loud_input_is_scaled_to_its_peak_and_silence_has_flat_features():
    loud = model_wave(np.array([0.5, -4.0, 2.0], dtype=np.float32), 16000)
    assert torch.equal(loud, torch.tensor([0.125, -1.0, 0.5]))
    silent = log_mel(torch.zeros(16000))
    assert silent.shape == (MEL_BINS, 100) and torch.all(silent == silent[0, 0])
