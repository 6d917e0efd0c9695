"""The transcriber, from audio files to text, gives the official transcribe()'s prompts, tokens, language and text
(tests/fixtures/asr) on two checkpoints (tiny, and a wider one with its own head, another seed): English, Chinese,
Japanese and Korean forced, mixed-script context, 8 kHz mu-law, 0.3 s, silence and 200 s inputs; with the aligner,
the official word timestamps. Decoded side by side, every clip gets the tokens it gets alone."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from asr_cases import (
    ASR_CHECKPOINTS,
    ASR_FIXTURE_DIR,
    MAX_NEW_TOKENS,
    TIMESTAMP_CASES,
    TRANSCRIBE_CASES,
    TRANSCRIBERS,
    write_asr_clip,
    write_word_list,
)
from qwen3_tts_server.audio.decoding import decode_audio
from qwen3_tts_server.errors import CheckpointError, ConfigurationError, InvalidInputError
from qwen3_tts_server.model.asr import loading as asr_loading
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.mel import model_wave
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.model.asr.word_split import WordSplitter
from qwen3_tts_server.model.cpu_linear import PrepackedLinear, RowwiseLinear
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16
from qwen3_tts_server.model.quantization import DynamicInt8Linear, Int8Linear, PackedLinear
from qwen3_tts_server.testing.random_asr_checkpoint import asr_token_id, make_asr_test_model

ORACLE = json.loads((ASR_FIXTURE_DIR / "oracle.json").read_text(encoding="utf-8"))
PAD = asr_token_id("<|endoftext|>")
CLIPS = sorted(
    {item["audio"] for items in TRANSCRIBE_CASES.values() for item in items}
    | {case["audio"] for case in TIMESTAMP_CASES.values()}
)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Each recording as the model hears it: decoded by PyAV from its file's bytes, mono, 16 kHz."""
    folder = tmp_path_factory.mktemp("clips")
    waves = {}
    for name in CLIPS:
        samples, rate = decode_audio(write_asr_clip(folder, name).read_bytes())
        waves[name] = model_wave(samples.T, rate).numpy()
    return waves


@pytest.fixture(scope="module")
def checkpoint_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("asr_checkpoints")
    return {name: make_asr_test_model(root / name, **spec) for name, spec in ASR_CHECKPOINTS.items()}


@pytest.fixture(scope="module", params=TRANSCRIBERS)
def transcriber(request, checkpoint_dirs):
    return request.param, Transcriber(load_asr_checkpoint(checkpoint_dirs[request.param]))


def unpadded(ids: list[int]) -> list[int]:
    return ids[next(i for i, token in enumerate(ids) if token != PAD) :]


@pytest.mark.parametrize("case", TRANSCRIBE_CASES)
def test_a_clip_gets_the_official_prompt_tokens_and_text(transcriber, clips, case):
    name, model = transcriber
    item, recorded = TRANSCRIBE_CASES[case][0], ORACLE["transcribe"][name][case]
    wave = clips[item["audio"]]
    ids = model.prompt_ids(item["context"], item["language"], len(model.encode(model.model, wave)))
    assert ids.tolist() == unpadded(recorded["input_ids"][0])
    (result,) = model.transcribe([wave], [item["language"]], [item["context"]], max_new_tokens=MAX_NEW_TOKENS)
    (tokens,) = result.part_tokens
    official = recorded["generated_ids"][0]  # after a stop token, the official batch pads with <|im_end|>
    assert tokens == official[: len(tokens)] and all(token == official[-1] for token in official[len(tokens) :])
    assert (result.language, result.text) == tuple(recorded["parsed"][0].values())
    assert result.truncated == (tokens[-1] not in model.model.tokens.stop)


def test_clips_decoded_side_by_side_get_what_they_get_alone(checkpoint_dirs, clips):
    model = Transcriber(load_asr_checkpoint(checkpoint_dirs["asr"]))
    items = [item for case, items in TRANSCRIBE_CASES.items() for item in items if case != "long"]  # long: alone
    args = [([clips[item["audio"]]], [item["language"]], [item["context"]]) for item in items]
    alone = [model.transcribe(*arg, max_new_tokens=MAX_NEW_TOKENS)[0].part_tokens[0] for arg in args]
    together = model.transcribe(*(sum(column, []) for column in zip(*args, strict=True)), max_new_tokens=32, rows=3)
    assert [result.part_tokens[0] for result in together] == alone
    # Rows with budgets of their own leave at different steps, and waiting ones join in their slots then.
    rows, budgets = model.rows(3), [3 + 3 * (i % 4) for i in range(len(items))]
    waiting, running, got = list(range(len(items)))[::-1], {}, {}
    while waiting or running:
        emitted = []
        while waiting and rows.free_slots:
            i = waiting.pop()
            row, (first,) = rows.join(model.embedded_prompt(args[i][0][0], args[i][2][0], args[i][1][0]), budgets[i])
            running[row], got[i] = i, []
            emitted.append(first)
        for token in emitted + rows.step():
            got[running[token.row]].append(token.token)
            if token.finished:
                del running[token.row]
    assert [got[i] for i in range(len(items))] == [tokens[: budgets[i]] for i, tokens in enumerate(alone)]


@pytest.mark.parametrize("case", TIMESTAMP_CASES)
def test_word_timestamps_are_the_official_ones(checkpoint_dirs, clips, tmp_path, case):
    spec, recorded = TIMESTAMP_CASES[case], ORACLE["timestamps"][case]
    model = Transcriber(
        load_asr_checkpoint(checkpoint_dirs["asr"]),
        load_asr_checkpoint(checkpoint_dirs["forced_aligner"]),
        WordSplitter(write_word_list(tmp_path / "korean.dict")),  # the word list the oracle's Korean was split with
    )
    (result,) = model.transcribe(
        [clips[spec["audio"]]], [spec["language"]], timestamps=True, max_new_tokens=MAX_NEW_TOKENS
    )
    assert (result.language, result.text) == (recorded["language"], recorded["text"])
    assert [(w.text, w.start, w.end) for w in result.words] == [
        (i["text"], i["start"], i["end"]) for i in recorded["items"]
    ]


def test_a_sharded_checkpoint_loads_as_the_whole_one(checkpoint_dirs, tmp_path, monkeypatch):
    from safetensors.torch import load_file, save_file

    monkeypatch.setattr(asr_loading, "cpu_multiplies_bfloat16", lambda: False)  # bfloat16 layers left plain

    whole = checkpoint_dirs["asr_small"]
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    for file in whole.iterdir():
        if file.name != "model.safetensors":
            (sharded / file.name).write_bytes(file.read_bytes())
    weights = load_file(whole / "model.safetensors")
    names = sorted(weights)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in halves.items():
        save_file({key: weights[key] for key in keys}, str(sharded / shard))
    index = {"weight_map": {key: shard for shard, keys in halves.items() for key in keys}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    one, other = (load_asr_checkpoint(path, dtype="bfloat16") for path in (whole, sharded))  # plain modules
    for module in ("encoder", "decoder", "head"):
        mine, theirs = getattr(one, module).state_dict(), getattr(other, module).state_dict()
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[key], theirs[key]) for key in mine)
    assert one.head.weight.data_ptr() != one.decoder.embed_tokens.weight.data_ptr()  # its own head


@pytest.mark.skipif(not cpu_multiplies_bfloat16(), reason="bfloat16 layers are reordered where the CPU multiplies it")
def test_bfloat16_layers_are_reordered_but_a_tied_head(checkpoint_dirs, clips):
    """On a CPU with bfloat16 instructions the encoder's (and an untied head's) layers are reordered for oneDNN
    (`model/cpu_linear.py`); a head tied to the embedding table stays the table. The transcript is the plain
    layers' one."""
    loaded = {name: load_asr_checkpoint(checkpoint_dirs[name], dtype="bfloat16") for name in ("asr", "asr_small")}
    for name, tied in (("asr", True), ("asr_small", False)):
        checkpoint = loaded[name]
        kinds = {type(module) for module in checkpoint.encoder.modules()}
        assert nn.Linear not in kinds and kinds & {PrepackedLinear, RowwiseLinear}
        assert isinstance(checkpoint.head, nn.Linear) == tied
        if tied:
            assert checkpoint.head.weight is checkpoint.decoder.embed_tokens.weight
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asr_loading, "cpu_multiplies_bfloat16", lambda: False)
        plain = load_asr_checkpoint(checkpoint_dirs["asr"], dtype="bfloat16")
    assert nn.Linear in {type(module) for module in plain.encoder.modules()}
    wave = clips["ref_16k_mono.wav"]
    reordered = loaded["asr"]
    (want,), (got,) = (Transcriber(model).transcribe([wave], max_new_tokens=8) for model in (plain, reordered))
    assert got.text == want.text and got.tokens == 8


def test_a_checkpoint_of_another_kind_is_refused_with_its_reason(checkpoint_dirs, tmp_path):
    config = json.loads((checkpoint_dirs["asr"] / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "qwen3_tts"}))
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((checkpoint_dirs["asr"] / name).read_bytes())
    with pytest.raises(CheckpointError, match="'qwen3_tts' model"):
        load_asr_checkpoint(tmp_path)
    with pytest.raises(InvalidInputError, match="not a transcriber"):
        Transcriber(load_asr_checkpoint(checkpoint_dirs["forced_aligner"]))
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="holds no model.safetensors"):
        load_asr_checkpoint(tmp_path)


def test_timestamps_without_an_aligner_are_refused(transcriber, clips):
    _, model = transcriber
    with pytest.raises(InvalidInputError, match="ForcedAligner"):
        model.transcribe([clips["short_16k.wav"]], timestamps=True)


@pytest.mark.parametrize("mode", ["int8", "int4", "w8a8"])
def test_quantised_weights_transcribe_and_say_so(checkpoint_dirs, clips, mode):
    checkpoint = load_asr_checkpoint(checkpoint_dirs["asr"], quantize=mode)
    assert (checkpoint.quantization, checkpoint.quantization_failure) == (mode, None)
    packed = [module for module in checkpoint.decoder.modules() if isinstance(module, PackedLinear)]
    assert len(packed) == 4 * 2  # qkv, o, gate_up, down
    dense_dtype = torch.bfloat16 if cpu_multiplies_bfloat16() else None  # the prefill's product, by the CPU
    # w8a8 without bfloat16 instructions: fbgemm's integer product for every row (faster than float32's)
    dense = dense_dtype is not None or mode != "w8a8"
    assert all(bool(module.dense_from_rows) == dense and module.dense_dtype == dense_dtype for module in packed)
    head_kind = DynamicInt8Linear if mode == "w8a8" else Int8Linear  # 8 bits on a CPU, whatever the mode
    assert isinstance(checkpoint.head, head_kind)
    if mode == "w8a8":  # its int8 codes dropped where no prefill converts them (kept weights, or fbgemm alone)
        assert checkpoint.head.weight is None and all(module.weight is None for module in packed)
    assert checkpoint.decoder.embed_tokens.weight.dtype == torch.float32  # the table the head was tied to
    transcriber = Transcriber(checkpoint)
    names = ["ref_16k_mono.wav", "phone_8k_mulaw.wav", "short_16k.wav"]
    together = transcriber.transcribe([clips[name] for name in names], max_new_tokens=8)
    assert all(result.tokens == 8 and result.text for result in together)
    if mode == "w8a8":  # each row's activations quantised alone: side by side, every clip gets its own tokens
        alone = [transcriber.transcribe([clips[name]], max_new_tokens=8)[0] for name in names]
        assert [result.text for result in together] == [result.text for result in alone]


def test_prefill_weights_kept_or_converted_give_the_same_transcript(checkpoint_dirs, clips):
    """PREFILL_WEIGHTS: kept, the int8 layers hold their dense weights (none when converted; auto keeps them where
    the CPU multiplies bfloat16); the prefill's product, and so the transcript, are the same either way."""
    results = {}
    for choice in ("kept", "converted", "auto"):
        checkpoint = load_asr_checkpoint(checkpoint_dirs["asr"], quantize="int8", prefill_weights=choice)
        layers = [module for module in checkpoint.decoder.modules() if isinstance(module, Int8Linear)]
        kept = choice == "kept" or (choice == "auto" and cpu_multiplies_bfloat16())
        assert all((layer.dense_weight is not None) == kept for layer in layers)
        (results[choice],) = Transcriber(checkpoint).transcribe([clips["ref_16k_mono.wav"]], max_new_tokens=8)
    assert results["kept"].text == results["converted"].text == results["auto"].text
    for quantize in ("int8", None):  # refused even where it would not apply
        with pytest.raises(ConfigurationError, match="unknown prefill_weights 'some'"):
            load_asr_checkpoint(checkpoint_dirs["asr"], quantize=quantize, prefill_weights="some")


def test_audio_shorter_than_one_feature_frame_is_refused(transcriber):
    _, model = transcriber
    with pytest.raises(InvalidInputError, match="clip 1 is 12.5 ms long; at least 12.6 ms"):
        model.transcribe([np.zeros(16000, np.float32), np.zeros(200, np.float32)])
