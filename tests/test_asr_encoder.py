"""The audio encoder gives the official one's output (tests/fixtures/asr/encoder.npz) for the official features of
whole recordings, of a clip under one chunk and of one whose tail chunk is padded; its token count is the prompt's
placeholder count; and its attention stays within 8 s blocks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from asr_cases import ASR_CHECKPOINTS, ASR_FIXTURE_DIR
from qwen3_tts_server.model.asr.encoder import AudioEncoder, AudioEncoderConfig, audio_tokens
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model

OFFICIAL = np.load(ASR_FIXTURE_DIR / "encoder.npz")
FEATURES = np.load(ASR_FIXTURE_DIR / "features.npz")
PREFIX = "thinker.audio_tower."


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> AudioEncoder:
    directory = make_asr_test_model(tmp_path_factory.mktemp("asr") / "asr", **ASR_CHECKPOINTS["asr"])
    config = json.loads((directory / "config.json").read_text())["thinker_config"]["audio_config"]
    module = AudioEncoder(AudioEncoderConfig.parse(config))
    weights = load_file(directory / "model.safetensors")
    module.load_state_dict({k.removeprefix(PREFIX): v for k, v in weights.items() if k.startswith(PREFIX)})
    return module.eval()


def features_of(key: str) -> torch.Tensor:
    name, _, frames = key.partition(":")
    return torch.from_numpy(FEATURES[name][:, : int(frames) if frames else None].copy())


@pytest.mark.parametrize("key", OFFICIAL.files)
def test_the_encoder_gives_the_official_output(encoder, key):
    features = features_of(key)
    with torch.inference_mode():
        encoded = encoder(features)
    assert encoded.shape == OFFICIAL[key].shape == (audio_tokens(features.shape[1]), 64)
    # The same float32 operations in order: bitwise equal to the official encoder run on the same CPU. The fixture
    # was recorded on one CPU; another's kernels (AVX-512 against AVX2) round the same operations differently, by
    # up to 1e-6 here, so across CPUs the output is held to 1e-5 (a wrong operation is off by 1e-3 or more).
    np.testing.assert_allclose(encoded.numpy(), OFFICIAL[key], rtol=0, atol=1e-5)


def test_the_placeholder_count_follows_the_chunks():
    assert [audio_tokens(frames) for frames in (1, 8, 9, 60, 99, 100, 101, 230, 800, 3000)] == [
        1, 1, 2, 8, 13, 13, 14, 30, 104, 390,
    ]  # fmt: skip


def test_a_clip_is_its_blocks_encoded_one_by_one(encoder):
    """20 s, two whole blocks and a tail: the clip's tokens are each block's own, bitwise (what lets a live stream
    encode a finished block once)."""
    torch.manual_seed(1)
    features = torch.randn(128, 2000)
    with torch.inference_mode():
        whole = encoder(features)
        blocks = [encoder.encode_block(block, 100) for block in features.split(800, dim=1)]
    assert [len(block) for block in blocks] == [104, 104, 52]
    assert torch.equal(whole, torch.cat(blocks))


def test_attention_stays_within_8_s_blocks(encoder):
    """Tokens of a clip's second 8 s block do not change when its first block's audio does (12 s: 104 + 52)."""
    torch.manual_seed(0)
    quiet, loud = torch.randn(128, 1200), torch.randn(128, 1200)
    loud[:, 800:] = quiet[:, 800:]
    with torch.inference_mode():
        first, second = encoder(quiet), encoder(loud)
    assert first.shape == (156, 64)
    assert not torch.allclose(first[:104], second[:104]) and torch.equal(first[104:], second[104:])
