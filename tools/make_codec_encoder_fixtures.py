"""Record the official speech-tokenizer encoder's codes as fixtures for tests/test_codec_encoder.py.

Run it in the oracle environment (official qwen-tts 0.1.1, transformers 4.57.3), from the repository root:

    ORACLE/bin/python tools/make_codec_encoder_fixtures.py

For two encoder configurations (the `tiny` test checkpoints' one and MimiConfig's defaults, the real size)
it draws weights with this project's `random_encoder_weights`, checks that the official encoder takes them
with a strict load, writes them to a speech-tokenizer directory, loads that with the official
`Qwen3TTSTokenizer.from_pretrained` and encodes deterministic signals through its `encode` (feature
extractor padding -> `Qwen3TTSTokenizerV2Model.encode`). It writes tests/fixtures/codec_encoder/<name>.json:
the config, a hash of the weights and of every signal, the official parameter names and shapes, and codes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import qwen_tts_oracle_stubs  # noqa: E402,F401  (must precede qwen_tts)
import torch  # noqa: E402
from qwen_tts import Qwen3TTSTokenizer  # noqa: E402
from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from qwen3_tts_server.model.tts.config import CodecEncoderConfig  # noqa: E402
from qwen3_tts_server.testing.codec_encoder_weights import (  # noqa: E402
    random_encoder_weights,
    reference_signal,
    signal_digest,
    weights_digest,
)
from qwen3_tts_server.testing.random_checkpoint import (  # noqa: E402
    DIMENSIONS,
    PREPROCESSOR_CONFIG,
    _speech_tokenizer_config,
)

FIXTURE_DIR = ROOT / "tests" / "fixtures" / "codec_encoder"
SEED = 20240611


def _item(kind: str, samples: int, seed: int) -> dict:
    return {"kind": kind, "samples": samples, "seed": seed}


# Lengths: not a multiple of 1920, an exact multiple, under one frame, a single 25 Hz step (the transformer
# sees one position), longer than Mimi's 250-step sliding window, and right-padded batches.
TINY_CASES = {
    "noise_partial_frame": [_item("noise", 37000, 11)],
    "chirp_exact_frames": [_item("chirp", 23040, 12)],
    "short_one_frame": [_item("noise", 1000, 13)],
    "single_transformer_step": [_item("chirp", 900, 14)],
    "long_past_sliding_window": [_item("noise", 288000, 15)],
    "batch_of_two": [_item("chirp", 30000, 16), _item("noise", 17500, 17)],
    "batch_of_three": [_item("noise", 9600, 18), _item("chirp", 17287, 19), _item("noise", 4000, 20)],
}
REAL_CASES = {
    "noise_partial_frame": [_item("noise", 36000, 21)],
    "long_past_sliding_window": [_item("chirp", 252000, 22)],
    "batch_of_two": [_item("chirp", 40000, 23), _item("noise", 23040, 24)],
}


def configs() -> dict[str, tuple[dict, dict]]:
    tiny = _speech_tokenizer_config(DIMENSIONS["tiny"])
    real = {**tiny, "encoder_config": {}}  # an empty encoder_config is MimiConfig's defaults
    return {"tiny": (tiny, TINY_CASES), "mimi_defaults": (real, REAL_CASES)}


def official_tokenizer(raw: dict, weights: dict[str, torch.Tensor], directory: Path) -> Qwen3TTSTokenizer:
    """Check a strict load into the official encoder, then load the files the official way."""
    model = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**raw))
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items() if k.startswith("encoder.")}
    got = {k: tuple(v.shape) for k, v in weights.items()}
    assert got == expected, "weight names/shapes differ from the official encoder"
    model.encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in weights.items()}, strict=True)

    directory.mkdir(parents=True)
    decoder = {k: v.contiguous() for k, v in model.state_dict().items() if k.startswith("decoder.")}
    save_file({**weights, **decoder}, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(raw, indent=1))
    (directory / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=1))
    tokenizer = Qwen3TTSTokenizer.from_pretrained(str(directory), dtype=torch.float32)
    loaded = tokenizer.model.state_dict()
    for name, tensor in weights.items():
        assert torch.equal(loaded[name], tensor), f"official load changed {name}"
    return tokenizer


def record(name: str, raw: dict, cases: dict, tmp: Path) -> dict:
    cfg = CodecEncoderConfig.parse(raw)
    weights = random_encoder_weights(cfg, torch.Generator().manual_seed(SEED))
    tokenizer = official_tokenizer(raw, weights, tmp / name)
    print(name, "attention:", tokenizer.model.encoder.config._attn_implementation)
    out_cases = {}
    for label, items in cases.items():
        signals = [reference_signal(i["kind"], i["samples"], i["seed"]) for i in items]
        encoded = tokenizer.encode([s.numpy() for s in signals], sr=24000)
        codes = [c.cpu().to(torch.int64) for c in encoded.audio_codes]
        for item, signal, c in zip(items, signals, codes, strict=True):
            assert c.shape == (-(-item["samples"] // cfg.encode_downsample_rate), cfg.valid_num_quantizers)
            item["sha256"] = signal_digest(signal)
        out_cases[label] = {"items": items, "codes": [c.tolist() for c in codes]}
        distinct = [len(set(c[:, 0].tolist())) for c in codes]
        print(f"  {label}: frames {[len(c) for c in codes]}, distinct first-codebook codes {distinct}")
    return {
        "oracle": "qwen-tts 0.1.1 Qwen3TTSTokenizer.encode, transformers 4.57.3, CPU, float32",
        "config": raw,
        "seed": SEED,
        "weights_sha256": weights_digest(weights),
        "parameters": {k: list(v.shape) for k, v in weights.items()},
        "cases": out_cases,
    }


def main() -> None:
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (raw, cases) in configs().items():
            fixture = record(name, raw, cases, Path(tmp))
            text = json.dumps(fixture, separators=(",", ":")) + "\n"
            (FIXTURE_DIR / f"{name}.json").write_text(text, encoding="utf-8")
            print("wrote", FIXTURE_DIR / f"{name}.json", len(text), "bytes")


if __name__ == "__main__":
    main()
