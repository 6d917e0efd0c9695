"""Record the official qwen-tts 0.1.1 outputs on this project's `tiny` checkpoints as test fixtures.

Run it in the oracle environment (built by ../shared/tools/oracle-venv.sh), from the repository root:

    ORACLE/bin/python tools/make_parity_fixtures.py

It builds the checkpoints with this project's `make_test_model` (imported from src/), records a hash of
their bytes, and writes tests/fixtures/parity/: greedy codes for single and batched CustomVoice and
VoiceDesign requests, waveforms the official codec decodes from given codes, and the official
processor's token ids for a multilingual corpus. The tests rebuild the checkpoints, check the hash and
compare.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import librosa  # noqa: E402
import qwen_tts_oracle_stubs  # noqa: E402,F401  (must precede qwen_tts)
import torch  # noqa: E402
from qwen_tts import Qwen3TTSModel  # noqa: E402

from parity_cases import (  # noqa: E402
    CHECKPOINTS,
    CLONE_BATCHES,
    CODEC_LENGTHS,
    CODEC_SEED,
    CUSTOM_VOICE_BATCHES,
    FIXTURE_DIR,
    MAX_FRAMES,
    REF_TEXT,
    REFERENCES,
    TOKENIZER_CORPUS,
    VOICE_DESIGN_BATCHES,
    checkpoint_digest,
    random_codes,
    write_reference,
)
from qwen3_tts_server.testing.random_checkpoint import make_test_model  # noqa: E402


def official_codes(model: Qwen3TTSModel, batch: list[dict], kind: str, refs: Path) -> list[list[list[int]]]:
    """Greedy codes of one official batched call, as its generate returns them (cut at EOS)."""
    captured = {}
    original = model.model.generate

    def capture(*args, **kwargs):
        codes, hiddens = original(*args, **kwargs)
        captured["codes"] = [c.cpu().numpy().tolist() for c in codes]
        return codes, hiddens

    model.model.generate = capture
    default_whole_text = kind != "base"  # the official defaults of non_streaming_mode
    common = dict(
        language=[case.get("language", "Auto") for case in batch],
        non_streaming_mode=batch[0].get("whole_text", default_whole_text),
        do_sample=False,
        subtalker_dosample=False,
        repetition_penalty=batch[0].get("repetition_penalty"),
        max_new_tokens=MAX_FRAMES + 1,  # the last sampled codebook-0 code never becomes a frame
    )
    texts = [case["text"] for case in batch]
    try:
        if kind == "custom_voice":
            model.generate_custom_voice(
                texts,
                speaker=[case["speaker"] for case in batch],
                instruct=[case.get("instruct", "") for case in batch],
                **common,
            )
        elif kind == "voice_design":
            model.generate_voice_design(texts, instruct=[case["instruct"] for case in batch], **common)
        else:
            model.generate_voice_clone(
                texts,
                ref_audio=[str(refs / case["ref"]) for case in batch],
                ref_text=[None if case.get("x_vector_only") else REF_TEXT[case["ref"]] for case in batch],
                x_vector_only_mode=[case.get("x_vector_only", False) for case in batch],
                **common,
            )
    finally:
        model.model.generate = original
    return captured["codes"]


def official_references(model: Qwen3TTSModel, refs: Path) -> dict:
    """Per reference file: the 24 kHz samples the official path feeds its encoders (as a hash), its
    speaker embedding and its codec codes."""
    out = {}
    for name in REFERENCES:
        path = refs / name
        audio, rate = model._load_audio_to_np(str(path))
        if rate != 24000:
            audio = librosa.resample(y=audio.astype(np.float32), orig_sr=rate, target_sr=24000)
        item = model.create_voice_clone_prompt(str(path), ref_text=REF_TEXT[name])[0]
        out[name] = {
            "samples": len(audio),
            "samples_sha256": hashlib.sha256(np.ascontiguousarray(audio, dtype=np.float32).tobytes()).hexdigest(),
            "speaker_embedding": item.ref_spk_embedding.float().cpu().numpy().tolist(),
            "codes": item.ref_code.cpu().numpy().tolist(),
        }
    return out


def main() -> None:
    torch.manual_seed(0)
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"oracle": "qwen-tts 0.1.1, transformers 4.57.3, CPU, float32", "max_frames": MAX_FRAMES}
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for name, spec in CHECKPOINTS.items():
            path = make_test_model(Path(tmp) / name, **spec)
            manifest.setdefault("checkpoints", {})[name] = {**spec, "sha256": checkpoint_digest(path)}
            models[name] = Qwen3TTSModel.from_pretrained(str(path), dtype=torch.float32)

        refs = Path(tmp) / "references"
        refs.mkdir()
        for name in REFERENCES:
            write_reference(refs, name)
        manifest["references"] = official_references(models["base"], refs)

        results = {}
        kinds = (
            ("custom_voice", CUSTOM_VOICE_BATCHES),
            ("voice_design", VOICE_DESIGN_BATCHES),
            ("base", CLONE_BATCHES),
        )
        for kind, batches in kinds:
            for label, batch in batches.items():
                results[label] = official_codes(models[kind], batch, kind, refs)
                print(label, [len(codes) for codes in results[label]])
        manifest["codes"] = results

        # The full official output of one in-context clone: the decode of reference + new codes, cut.
        case = CLONE_BATCHES["clone_icl_english"][0]
        wavs_clone, _ = models["base"].generate_voice_clone(
            case["text"],
            language=case["language"],
            ref_audio=str(refs / case["ref"]),
            ref_text=REF_TEXT[case["ref"]],
            do_sample=False,
            subtalker_dosample=False,
            max_new_tokens=MAX_FRAMES + 1,
        )

        codec = models["custom_voice"].model.speech_tokenizer
        waveforms = {}
        for frames in CODEC_LENGTHS:
            codes = torch.from_numpy(random_codes(frames, CODEC_SEED))
            wavs, rate = codec.decode([{"audio_codes": codes}])
            assert rate == 24000
            waveforms[f"frames_{frames}"] = wavs[0].astype(np.float32)
        waveforms["clone_icl_english"] = wavs_clone[0].astype(np.float32)
        np.savez_compressed(FIXTURE_DIR / "waveforms.npz", **waveforms)

        processor = models["custom_voice"].processor
        manifest["tokenizer"] = [processor(text=text)["input_ids"][0] for text in TOKENIZER_CORPUS]

    (FIXTURE_DIR / "official.json").write_text(
        json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    print("wrote", FIXTURE_DIR)


if __name__ == "__main__":
    main()
