"""Speaker encoder: parity with the official qwen-tts 0.1.1 outputs recorded by
tools/make_speaker_encoder_fixtures.py, config validation and behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from qwen3_tts_server.errors import CheckpointError, InvalidInputError
from qwen3_tts_server.model.tts.speaker_encoder import (
    SpeakerEncoder,
    SpeakerEncoderConfig,
    log_mel_spectrogram,
    mel_filterbank,
)
from qwen3_tts_server.testing.speaker_encoder_weights import (
    PREFIX,
    TINY_SPEAKER_ENCODER_CONFIG,
    random_speaker_encoder_weights,
    speaker_encoder_test_signals,
    weights_digest,
)

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "speaker_encoder"
META = json.loads((FIXTURE_DIR / "official.json").read_text())
CONFIG_LABELS = tuple(META["configs"])


@pytest.fixture(scope="module")
def official() -> dict[str, np.ndarray]:
    with np.load(FIXTURE_DIR / "official.npz") as data:
        return {name: data[name] for name in data.files}


@pytest.fixture(scope="module")
def signals() -> dict[str, np.ndarray]:
    built = speaker_encoder_test_signals()
    assert {name: x.size for name, x in built.items()} == META["signals"]
    return built


@pytest.fixture(scope="module")
def encoders() -> dict[str, SpeakerEncoder]:
    built = {}
    for label, entry in META["configs"].items():
        cfg = SpeakerEncoderConfig.parse(entry["section"])
        weights = random_speaker_encoder_weights(cfg, torch.Generator().manual_seed(entry["seed"]))
        assert weights_digest(weights) == entry["weights_sha256"], f"{label}: weights differ from the fixture's"
        encoder = SpeakerEncoder(cfg)
        encoder.load_state_dict({name.removeprefix(PREFIX): t for name, t in weights.items()}, strict=True)
        built[label] = encoder.eval()
    return built


def test_filterbank_matches_librosa(official):
    ours = mel_filterbank().numpy()
    assert ours.shape == official["filterbank"].shape == (128, 513)
    assert ours.dtype == np.float32
    assert np.abs(ours - official["filterbank"]).max() <= 1e-6


def test_log_mel_matches_official(official, signals):
    ours = log_mel_spectrogram(torch.from_numpy(signals[META["mel_signal"]]))[0].numpy()
    assert ours.shape == official["mel"].shape
    assert np.abs(ours - official["mel"]).max() <= 1e-4


@pytest.mark.parametrize("label", CONFIG_LABELS)
def test_state_dict_matches_official_names_and_shapes(label):
    cfg = SpeakerEncoderConfig.parse(META["configs"][label]["section"])
    ours = {PREFIX + name: list(t.shape) for name, t in SpeakerEncoder(cfg).state_dict().items()}
    assert ours == META["configs"][label]["state_dict"]
    weights = random_speaker_encoder_weights(cfg, torch.Generator().manual_seed(0))
    assert {name: list(t.shape) for name, t in weights.items()} == ours


@pytest.mark.parametrize("label", CONFIG_LABELS)
def test_embeddings_match_official(label, official, signals, encoders):
    encoder = encoders[label]
    for name, audio in signals.items():
        expected = official[f"{label}.{name}"]
        ours = encoder.embed(torch.from_numpy(audio))
        assert ours.dtype == torch.float32
        assert ours.shape == expected.shape == (encoder.cfg.enc_dim,)
        assert np.abs(ours.numpy() - expected).max() <= 1e-4, f"{label}/{name}"


@pytest.mark.parametrize("label", CONFIG_LABELS)
def test_embeddings_distinguish_signals_and_repeat_exactly(label, encoders, signals):
    encoder = encoders[label]
    embeddings = {name: encoder.embed(torch.from_numpy(audio)) for name, audio in signals.items()}
    names = list(embeddings)
    for i, first in enumerate(names):
        a = embeddings[first]
        assert torch.isfinite(a).all() and a.std() > 1e-3
        for second in names[i + 1 :]:
            b = embeddings[second]
            assert (a - b).norm() > 0.1 * max(a.norm(), b.norm()), (first, second)
    again = encoder.embed(torch.from_numpy(signals["short"].copy()))
    assert torch.equal(again, embeddings["short"])


def test_bfloat16_module_runs_in_its_dtype(encoders, signals):
    encoder = SpeakerEncoder(encoders["tiny"].cfg)
    encoder.load_state_dict(encoders["tiny"].state_dict())
    encoder.to(torch.bfloat16)
    audio = torch.from_numpy(signals["short"])
    low = encoder.embed(audio)
    assert low.dtype == torch.bfloat16
    reference = encoders["tiny"].embed(audio)
    assert torch.nn.functional.cosine_similarity(low.float(), reference, dim=0) > 0.99


def test_too_short_or_wrong_shape_audio_is_rejected(encoders):
    encoder = encoders["tiny"]
    for samples in (100, 1000):
        with pytest.raises(InvalidInputError):
            encoder.embed(torch.zeros(samples))
    with pytest.raises(InvalidInputError):
        encoder.embed(torch.zeros(2, 24000))
    assert encoder.embed(torch.zeros(1280)).shape == (64,)  # 5 frames: the shortest the convolutions accept


def test_config_defaults_and_validation():
    cfg = SpeakerEncoderConfig.parse({"enc_dim": 2048, "model_type": "ignored"})
    assert cfg.enc_dim == 2048
    assert cfg.enc_channels == (512, 512, 512, 512, 1536)
    assert (cfg.enc_kernel_sizes, cfg.enc_dilations) == ((5, 3, 3, 3, 1), (1, 2, 3, 4, 1))
    assert (cfg.enc_attention_channels, cfg.enc_res2net_scale, cfg.enc_se_channels) == (128, 8, 128)
    assert (cfg.mel_dim, cfg.sample_rate) == (128, 24000)
    assert SpeakerEncoderConfig.parse({}).enc_dim == 1024
    bad = [
        {"sample_rate": 16000},
        {"mel_dim": 80},
        {"enc_kernel_sizes": [5, 3, 3, 1]},
        {"enc_channels": [512, 512, 512, 512, 1024]},
        {"enc_channels": [500, 500, 500, 500, 1500]},
        {"enc_dilations": [1, 0, 3, 4, 1]},
        {"enc_dim": "wide"},
        {"enc_channels": 512},
    ]
    for section in bad:
        with pytest.raises(CheckpointError):
            SpeakerEncoderConfig.parse(section)
    assert SpeakerEncoderConfig.parse(TINY_SPEAKER_ENCODER_CONFIG).enc_channels == (32, 32, 32, 32, 96)
