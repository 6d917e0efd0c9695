"""Record the official qwen-asr 0.0.6 outputs on this project's tiny Qwen3-ASR and ForcedAligner checkpoints as
test fixtures.

Run it in the ASR oracle environment (tools/asr_oracle_venv.sh DIR), from the repository root:

    HF_HUB_OFFLINE=1 DIR/bin/python tools/make_asr_fixtures.py

It builds the checkpoints with this project's `make_asr_test_model` (imported from src/) and writes
tests/fixtures/asr/oracle.json: each checkpoint's hash and the official loader's verdict on it (missing,
unexpected and mismatched weights), then for every case of tests/asr_cases.py the official prompt ids, generated
ids, decoded and parsed output (transformers backend, CPU, float32, greedy), and for the aligner its input ids,
the argmax at each timestamp slot and the repaired items, and the official word split of every WORD_SPLIT_CASES
transcript (Korean with KOREAN_TEST_WORDS as the word list: the official one ships with qwen-asr only);
tests/fixtures/asr/features.npz, the official log-mel
features of each reference recording; and tests/fixtures/asr/encoder.npz, the official audio encoder's output for
those features (and for the first 60 and 150 frames of one: a clip under one chunk, and one with a padded tail).
The tests rebuild the checkpoints, check the hash and compare.

The official features are exact only on a machine whose floating point rounds like the recording machine's (the
FFT and vector maths take other code paths on other CPUs: features.npz differs from an AVX-512 Xeon's in the last
bits). On another machine,

    HF_HUB_OFFLINE=1 DIR/bin/python tools/make_asr_fixtures.py --features-only

records the official features alone, as tests/fixtures/asr/features-<the CPU's vector unit>.npz; the front end's
test compares with the file recorded on a machine that rounds like the one it runs on.

The audio encoder attends within 8 s blocks on the official flash-attention and vLLM paths, across the whole clip
on its CPU (sdpa) path (docs/asr_reference.md, section e). The recording takes the blocks: the audio tower's
attention is the official sdpa attention run within each block its flash-attention call is given (`cu_seqlens`),
which is what that kernel computes. Clips up to 8 s are the same either way.
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

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from qwen_asr import Qwen3ASRModel, Qwen3ForcedAligner  # noqa: E402
from qwen_asr.inference.qwen3_forced_aligner import Qwen3ForceAlignProcessor  # noqa: E402
from qwen_asr.inference.utils import (  # noqa: E402
    merge_languages,
    normalize_audio_input,
    parse_asr_output,
    split_audio_into_chunks,
)
from transformers import AttentionInterface, AutoModel  # noqa: E402

from asr_cases import (  # noqa: E402
    ALIGN_CASES,
    ASR_CHECKPOINTS,
    ASR_FIXTURE_DIR,
    ENCODER_CUT_CLIP,
    ENCODER_CUTS,
    KOREAN_TEST_WORDS,
    MAX_NEW_TOKENS,
    MERGE_CASES,
    PARSE_CASES,
    REPAIR_CASES,
    SPLIT_CASES,
    TIMESTAMP_CASES,
    TRANSCRIBE_CASES,
    TRANSCRIBERS,
    WORD_SPLIT_CASES,
    split_wave,
    write_asr_clip,
)
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model  # noqa: E402

FEATURE_SECONDS = 10.0  # features.npz keeps the clips up to this long (the long one's features are 10 MB)
BLOCK_ATTENTION = "asr_blocks"


def block_attention(module, query, key, value, attention_mask, scaling=None, cu_seq_lens_q=None, **kwargs):
    """The flash-attention call of the audio tower, [1, heads, tokens, dim] -> [1, tokens, heads, dim]: sdpa within
    each block of `cu_seq_lens_q`."""
    bounds = cu_seq_lens_q.tolist()
    blocks = [
        F.scaled_dot_product_attention(query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], scale=scaling)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return torch.cat(blocks, dim=2).transpose(1, 2).contiguous(), None


AttentionInterface.register(BLOCK_ATTENTION, block_attention)


def with_block_attention(thinker):
    """The thinker, its audio tower attending within blocks (the decoder keeps sdpa)."""
    thinker.audio_tower.config._attn_implementation = BLOCK_ATTENTION
    for layer in thinker.audio_tower.layers:
        assert layer.self_attn.config._attn_implementation == BLOCK_ATTENTION
    assert thinker.model.config._attn_implementation == "sdpa"
    return thinker


def loader_verdict(directory: Path) -> dict:
    """What the official loader says of the checkpoint's weights (every list empty: it takes them as they are)."""
    _, info = AutoModel.from_pretrained(str(directory), dtype=torch.float32, output_loading_info=True)
    return {key: sorted(map(str, value)) for key, value in info.items()}


def transcriptions(directory: Path, audio: dict[str, Path]) -> dict:
    model = Qwen3ASRModel.from_pretrained(
        str(directory), dtype=torch.float32, device_map="cpu", max_new_tokens=MAX_NEW_TOKENS
    )
    with_block_attention(model.model.thinker)
    calls: list[dict] = []
    generate = model.model.generate

    def recording(**inputs):  # one batch of the transcribe() call
        output = generate(**inputs)
        prompt = inputs["input_ids"]
        calls.append(
            {
                "input_ids": prompt.tolist(),
                "generated_ids": output.sequences[:, prompt.shape[1] :].tolist(),
                "feature_frames": inputs["feature_attention_mask"].sum(dim=1).tolist(),
            }
        )
        return output

    model.model.generate = recording
    results = {}
    for name, items in TRANSCRIBE_CASES.items():
        calls.clear()
        answers = model.transcribe(
            audio=[str(audio[item["audio"]]) for item in items],
            language=[item["language"] for item in items],
            context=[item["context"] for item in items],
        )
        (call,) = calls
        results[name] = {
            **call,
            "decoded": model.processor.batch_decode(
                call["generated_ids"], skip_special_tokens=True, clean_up_tokenization_spaces=False
            ),
            "parsed": [{"language": answer.language, "text": answer.text} for answer in answers],
        }
    return results


def with_korean_test_words(processor: Qwen3ForceAlignProcessor) -> Qwen3ForceAlignProcessor:
    """The official processor splitting Korean with KOREAN_TEST_WORDS in place of its own word list."""
    processor.ko_score = {word: 1.0 for word in KOREAN_TEST_WORDS}
    processor.ko_tokenizer = None
    return processor


def timestamped(directory: Path, aligner_directory: Path, audio: dict[str, Path]) -> dict:
    model = Qwen3ASRModel.from_pretrained(
        str(directory),
        dtype=torch.float32,
        device_map="cpu",
        max_new_tokens=MAX_NEW_TOKENS,
        forced_aligner=str(aligner_directory),
        forced_aligner_kwargs={"dtype": torch.float32, "device_map": "cpu"},
    )
    with_block_attention(model.model.thinker)
    with_block_attention(model.forced_aligner.model.thinker)
    with_korean_test_words(model.forced_aligner.aligner_processor)
    results = {}
    for name, case in TIMESTAMP_CASES.items():
        (answer,) = model.transcribe(
            audio=str(audio[case["audio"]]), language=case["language"], return_time_stamps=True
        )
        items = answer.time_stamps.items if answer.time_stamps is not None else []
        results[name] = {
            "language": answer.language,
            "text": answer.text,
            "items": [{"text": i.text, "start": i.start_time, "end": i.end_time} for i in items],
        }
    return results


def alignments(directory: Path, audio: dict[str, Path]) -> dict:
    aligner = Qwen3ForcedAligner.from_pretrained(str(directory), dtype=torch.float32, device_map="cpu")
    with_korean_test_words(aligner.aligner_processor)
    with_block_attention(aligner.model.thinker)
    seen: dict = {}
    forward = aligner.model.thinker.forward

    def recording(**inputs):  # align() runs one forward pass through the thinker
        output = forward(**inputs)
        slots = inputs["input_ids"] == aligner.timestamp_token_id
        seen["input_ids"] = inputs["input_ids"].tolist()
        seen["slot_classes"] = output.logits.argmax(dim=-1)[slots].tolist()
        return output

    aligner.model.thinker.forward = recording
    results = {}
    for name, case in ALIGN_CASES.items():
        (result,) = aligner.align(audio=str(audio[case["audio"]]), text=case["text"], language=case["language"])
        results[name] = {
            **seen,
            "items": [{"text": i.text, "start": i.start_time, "end": i.end_time} for i in result.items],
        }
    results["repair"] = [aligner.aligner_processor.fix_timestamp(np.array(case)) for case in REPAIR_CASES]
    return results


def official_features(processor, audio: dict[str, Path]) -> dict[str, np.ndarray]:
    """The official processor's log-mel features of each recording up to FEATURE_SECONDS long."""
    features = {}
    for name, path in audio.items():
        wave = normalize_audio_input(str(path))  # mono, 16 kHz, as transcribe() hands it on
        if len(wave) > FEATURE_SECONDS * 16000:
            continue
        extracted = processor.feature_extractor(
            wave, sampling_rate=16000, padding=True, truncation=False, return_attention_mask=True
        )  # the processor's own audio settings
        frames = int(np.sum(extracted["attention_mask"][0]))
        features[name] = np.asarray(extracted["input_features"][0], dtype=np.float32)[:, :frames]
    return features


def recordings(root: Path) -> dict[str, Path]:
    names = {item["audio"] for items in TRANSCRIBE_CASES.values() for item in items}
    names |= {case["audio"] for case in (*ALIGN_CASES.values(), *TIMESTAMP_CASES.values())}
    return {name: write_asr_clip(root, name) for name in sorted(names)}


def record_features_only() -> None:
    """features-<vector unit>.npz: the official features as this machine computes them."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        checkpoint = make_asr_test_model(root / "asr", **ASR_CHECKPOINTS["asr"])
        processor = Qwen3ASRModel.from_pretrained(str(checkpoint), dtype=torch.float32, device_map="cpu").processor
        features = official_features(processor, recordings(root))
    path = ASR_FIXTURE_DIR / f"features-{torch.backends.cpu.get_cpu_capability().lower()}.npz"
    np.savez_compressed(path, **features)
    print(f"wrote {path}")


def main() -> None:
    ASR_FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    if sys.argv[1:] == ["--features-only"]:
        record_features_only()
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        audio = recordings(root)
        checkpoints = {name: make_asr_test_model(root / name, **spec) for name, spec in ASR_CHECKPOINTS.items()}
        fixture = {
            "checkpoints": {
                name: {
                    "sha256": hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest(),
                    "loader": loader_verdict(path),
                }
                for name, path in checkpoints.items()
            },
            "transcribe": {name: transcriptions(checkpoints[name], audio) for name in TRANSCRIBERS},
            "timestamps": timestamped(checkpoints["asr"], checkpoints["forced_aligner"], audio),
            "align": alignments(checkpoints["forced_aligner"], audio),
            "words": [
                with_korean_test_words(Qwen3ForceAlignProcessor()).encode_timestamp(text, language)[0]
                for text, language in WORD_SPLIT_CASES
            ],
            "parse": [list(parse_asr_output(decoded, forced)) for decoded, forced in PARSE_CASES],
            "merge": [merge_languages(languages) for languages in MERGE_CASES],
            "split": {
                name: [
                    {"samples": len(part), "offset": offset, "end_sample": int(np.sum(np.abs(part) > 0))}
                    for part, offset in split_audio_into_chunks(split_wave(seconds, quiet), 16000, longest)
                ]
                for name, (seconds, quiet, longest) in SPLIT_CASES.items()
            },
        }
        official = Qwen3ASRModel.from_pretrained(str(checkpoints["asr"]), dtype=torch.float32, device_map="cpu")
        with_block_attention(official.model.thinker)
        features = official_features(official.processor, audio)
        cut = features[ENCODER_CUT_CLIP]
        clips = {**features, **{f"{ENCODER_CUT_CLIP}:{frames}": cut[:, :frames] for frames in ENCODER_CUTS}}
        encoded = {}
        with torch.no_grad():
            for key, mel in clips.items():
                tower = official.model.thinker.audio_tower
                output = tower(torch.from_numpy(np.ascontiguousarray(mel)), feature_lens=torch.tensor([mel.shape[1]]))
                encoded[key] = output.last_hidden_state.numpy()
    (ASR_FIXTURE_DIR / "oracle.json").write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    np.savez_compressed(ASR_FIXTURE_DIR / "features.npz", **features)
    np.savez_compressed(ASR_FIXTURE_DIR / "encoder.npz", **encoded)
    print(f"wrote {ASR_FIXTURE_DIR}")


if __name__ == "__main__":
    main()
