"""The speech-tokenizer encoder (audio -> codes) against codes the official package produced.

tests/fixtures/codec_encoder/ is written by tools/make_codec_encoder_fixtures.py in the oracle environment:
the same random weights (checked here by hash) and signals went through the official
`Qwen3TTSTokenizer.encode`. Codes must be identical.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from qwen3_tts_server.errors import CheckpointError, InvalidInputError, UnsupportedModelError
from qwen3_tts_server.model.tts.codec_encoder import CodecEncoder
from qwen3_tts_server.model.tts.config import CodecEncoderConfig
from qwen3_tts_server.testing.codec_encoder_weights import (
    random_encoder_weights,
    reference_signal,
    signal_digest,
    weights_digest,
)
from qwen3_tts_server.testing.random_checkpoint import DIMENSIONS, _speech_tokenizer_config

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "codec_encoder"
FIXTURES = {name: json.loads((FIXTURE_DIR / f"{name}.json").read_text()) for name in ("tiny", "mimi_defaults")}
CASES = [(name, label) for name, fixture in FIXTURES.items() for label in fixture["cases"]]
REGENERATE = "regenerate with tools/make_codec_encoder_fixtures.py"


def _weights(name: str) -> dict[str, torch.Tensor]:
    fixture = FIXTURES[name]
    cfg = CodecEncoderConfig.parse(fixture["config"])
    return random_encoder_weights(cfg, torch.Generator().manual_seed(fixture["seed"]))


@pytest.fixture(scope="module")
def encoders() -> dict[str, CodecEncoder]:
    out = {}
    for name, fixture in FIXTURES.items():
        encoder = CodecEncoder(CodecEncoderConfig.parse(fixture["config"])).eval()
        encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in _weights(name).items()}, strict=True)
        out[name] = encoder
    return out


def _batch(signals: list[torch.Tensor]) -> torch.Tensor:
    """Right-pad with zeros to the longest, as the official feature extractor does."""
    audio = torch.zeros(len(signals), max(len(s) for s in signals))
    for row, signal in zip(audio, signals, strict=True):
        row[: len(signal)] = signal
    return audio


def test_tiny_fixture_config_is_the_test_checkpoints_one():
    assert FIXTURES["tiny"]["config"] == _speech_tokenizer_config(DIMENSIONS["tiny"]), REGENERATE


@pytest.mark.parametrize("name", list(FIXTURES))
def test_weights_and_names_are_the_recorded_official_ones(name):
    weights = _weights(name)
    assert weights_digest(weights) == FIXTURES[name]["weights_sha256"], REGENERATE
    assert {k: list(v.shape) for k, v in weights.items()} == FIXTURES[name]["parameters"]
    assert all(v.dtype == torch.float32 for v in weights.values())


@pytest.mark.parametrize("name", list(FIXTURES))
def test_a_parent_module_loads_the_checkpoint_entries_strictly(name):
    parent = nn.Module()
    parent.encoder = CodecEncoder(CodecEncoderConfig.parse(FIXTURES[name]["config"]))
    weights = _weights(name)
    assert set(parent.state_dict()) == set(weights)
    parent.load_state_dict(weights, strict=True)


@pytest.mark.parametrize(("name", "label"), CASES)
def test_codes_are_identical_to_the_official_encoder(encoders, name, label):
    case = FIXTURES[name]["cases"][label]
    signals = [reference_signal(item["kind"], item["samples"], item["seed"]) for item in case["items"]]
    for item, signal in zip(case["items"], signals, strict=True):
        assert signal_digest(signal) == item["sha256"], REGENERATE
    codes = encoders[name].encode(_batch(signals), [len(s) for s in signals])
    assert len(codes) == len(case["codes"])
    for ours, official in zip(codes, case["codes"], strict=True):
        assert ours.dtype == torch.int64
        assert ours.tolist() == official


def test_random_weights_give_varied_codes(encoders):
    codes = torch.tensor(FIXTURES["tiny"]["cases"]["long_past_sliding_window"]["codes"][0])
    for book in range(codes.shape[1]):
        assert len(set(codes[:, book].tolist())) > codes.shape[0] // 3


def test_frames_are_the_ceiling_of_length_over_1920(encoders):
    lengths = [0, 1, 1919, 1920, 1921, 7 * 1920 + 5]
    signals = [reference_signal("noise", n, seed) for seed, n in enumerate(lengths)]
    codes = encoders["tiny"].encode(_batch(signals), lengths)
    assert [tuple(c.shape) for c in codes] == [(-(-n // 1920), 16) for n in lengths]
    assert all(c.numel() == 0 or (int(c.min()) >= 0 and int(c.max()) < 2048) for c in codes)
    whole = encoders["tiny"].encode(_batch(signals[-1:]))
    assert torch.equal(whole[0], codes[-1])  # lengths default to the full width


def test_a_batch_gives_each_item_its_single_codes_up_to_its_padded_last_frame(encoders):
    """Codes are causal: padding on the right only reaches the frame holding the item's end. A last frame
    that is only partly audio sees the batch's padding instead of the item's own zero padding and may
    differ, exactly as in the official encoder; complete frames and the longest item are identical."""
    lengths = [9600, 17287, 30000, 4000]
    signals = [reference_signal("chirp" if i % 2 else "noise", n, 40 + i) for i, n in enumerate(lengths)]
    batch = encoders["tiny"].encode(_batch(signals), lengths)
    for signal, codes in zip(signals, batch, strict=True):
        single = encoders["tiny"].encode(signal[None])[0]
        assert single.shape == codes.shape
        complete = len(signal) // 1920
        assert torch.equal(single[:complete], codes[:complete])
        if len(signal) == max(lengths):
            assert torch.equal(single, codes)


def test_bad_audio_is_refused(encoders):
    encoder = encoders["tiny"]
    with pytest.raises(InvalidInputError):
        encoder.encode(torch.zeros(1920))
    with pytest.raises(InvalidInputError):
        encoder.encode(torch.zeros(2, 1920), [1920])
    with pytest.raises(InvalidInputError):
        encoder.encode(torch.zeros(1, 1920), [1921])


def _raw(**encoder_fields) -> dict:
    return {**_speech_tokenizer_config(DIMENSIONS["tiny"]), "encoder_config": encoder_fields}


def test_an_empty_encoder_config_is_mimi_config_defaults():
    cfg = CodecEncoderConfig.parse(_raw())
    assert (cfg.hidden_size, cfg.num_filters, cfg.upsampling_ratios) == (512, 64, (8, 6, 5, 4))
    assert (cfg.num_quantizers, cfg.codebook_size, cfg.codebook_dim, cfg.num_semantic_quantizers) == (32, 2048, 256, 1)
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (8, 8, 8, 64)
    assert (cfg.frame_rate, cfg.encodec_frame_rate, cfg.downsample_kernel) == (12.5, 25, 4)
    assert (cfg.hidden_act, cfg.norm_eps, cfg.sliding_window, cfg.pad_mode) == ("gelu", 1e-5, 250, "constant")
    assert (cfg.valid_num_quantizers, cfg.encode_downsample_rate, cfg.input_sample_rate) == (16, 1920, 24000)


def test_serialised_frame_rate_wins_and_derived_sizes_follow():
    raw = _raw(_frame_rate=6.25, frame_rate=12.5, codebook_dim=None, hidden_size=256, sliding_window=None)
    cfg = CodecEncoderConfig.parse(raw)
    assert (cfg.frame_rate, cfg.downsample_kernel, cfg.codebook_dim, cfg.head_dim) == (6.25, 8, 256, 32)
    assert cfg.sliding_window is None


def test_a_missing_encoder_config_names_the_field():
    raw = _speech_tokenizer_config(DIMENSIONS["tiny"])
    del raw["encoder_config"]
    with pytest.raises(CheckpointError, match="encoder_config"):
        CodecEncoderConfig.parse(raw)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"hidden_size": None}, "hidden_size"),
        ({"num_filters": "many"}, "num_filters"),
        ({"codebook_size": 1000}, "codebook_size"),
        ({"num_attention_heads": 3}, "heads"),
    ],
)
def test_broken_fields_are_checkpoint_errors(fields, message):
    with pytest.raises(CheckpointError, match=message):
        CodecEncoderConfig.parse(_raw(**fields))


def test_a_wrong_downsample_rate_or_quantizer_count_is_refused():
    for top in ({"encode_downsample_rate": 960}, {"encoder_valid_num_quantizers": 33}):
        with pytest.raises(CheckpointError, match=next(iter(top))):
            CodecEncoderConfig.parse({**_raw(), **top})


@pytest.mark.parametrize(
    "fields",
    [
        {"audio_channels": 2},
        {"use_streaming": True},
        {"pad_mode": "circular"},
        {"hidden_act": "gelu_new"},
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
        {"residual_kernel_size": [3, 3]},
        {"frame_rate": 25},
    ],
)
def test_options_not_implemented_are_refused(fields):
    with pytest.raises(UnsupportedModelError):
        CodecEncoderConfig.parse(_raw(**fields))
