"""Every bad input ends in a clear error naming the problem, never a traceback or a hang."""

from __future__ import annotations

import json
import shutil

import huggingface_hub.constants
import pytest
import torch

from qwen3_tts_server.errors import CheckpointError, ConfigurationError, InvalidInputError, UnsupportedModelError
from qwen3_tts_server.model.tts.prompt import SpeechInput
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel


def _build(model, **fields):
    return model.prompts.build(SpeechInput(**{"text": "Hello.", "language": "English", **fields}))


def test_unknown_speaker_lists_the_valid_ones(models):
    with pytest.raises(InvalidInputError, match="unknown speaker 'Nobody'.*vivian") as info:
        _build(models["custom_voice"], speaker="Nobody")
    assert info.value.param == "speaker"


def test_missing_speaker_on_custom_voice(models):
    with pytest.raises(InvalidInputError, match="speaker is required.*serena"):
        _build(models["custom_voice"])


def test_unknown_language_lists_them(models):
    with pytest.raises(InvalidInputError, match="unknown language 'Klingon'.*english.*spanish"):
        _build(models["custom_voice"], speaker="Vivian", language="Klingon")


def test_dialect_is_not_a_language_of_its_own(models):
    with pytest.raises(InvalidInputError, match="unknown language"):
        _build(models["custom_voice"], speaker="Dylan", language="beijing_dialect")


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text(models, text):
    with pytest.raises(InvalidInputError, match="text is empty"):
        _build(models["custom_voice"], speaker="Vivian", text=text)


def test_voice_design_needs_an_instruction_and_no_speaker(models):
    with pytest.raises(InvalidInputError, match="needs an instruction"):
        _build(models["voice_design"])
    with pytest.raises(InvalidInputError, match="no preset speakers"):
        _build(models["voice_design"], speaker="Vivian", instruct="Calm.")


def _copy_with_config(src, dst, **changes):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config.update(changes)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_instruct_refused_by_the_0_6b_custom_voice(checkpoint_dirs, tmp_path):
    path = _copy_with_config(checkpoint_dirs["custom_voice"], tmp_path / "cv0b6", tts_model_size="0b6")
    model = Qwen3TTSModel.load(path)
    with pytest.raises(InvalidInputError, match="does not take an instruction"):
        _build(model, speaker="Vivian", instruct="Speak happily.")
    assert len(_build(model, speaker="Vivian").prefill) > 0


@pytest.mark.parametrize(
    "missing", ["config.json", "model.safetensors", "merges.txt", "speech_tokenizer/model.safetensors"]
)
def test_checkpoint_missing_a_file_names_it(checkpoint_dirs, tmp_path, missing):
    path = tmp_path / "broken"
    shutil.copytree(checkpoint_dirs["custom_voice"], path)
    (path / missing).unlink()
    with pytest.raises(CheckpointError, match=f"missing {missing}"):
        Qwen3TTSModel.load(path)


def test_25hz_model_is_unsupported(checkpoint_dirs, tmp_path):
    path = _copy_with_config(
        checkpoint_dirs["custom_voice"], tmp_path / "v1", tokenizer_type="qwen3_tts_tokenizer_25hz"
    )
    with pytest.raises(UnsupportedModelError, match="25 Hz"):
        Qwen3TTSModel.load(path)


def test_unknown_model_type_is_unsupported(checkpoint_dirs, tmp_path):
    path = _copy_with_config(checkpoint_dirs["custom_voice"], tmp_path / "odd", tts_model_type="music")
    with pytest.raises(UnsupportedModelError, match="'music' is not supported"):
        Qwen3TTSModel.load(path)


def test_truncated_weights_are_reported(checkpoint_dirs, tmp_path):
    path = tmp_path / "truncated"
    shutil.copytree(checkpoint_dirs["custom_voice"], path)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="cannot read weights"):
        Qwen3TTSModel.load(path)


def test_offline_uncached_hub_id_says_how_to_pass_a_path(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(CheckpointError, match="--model PATH"):
        Qwen3TTSModel.load("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        Qwen3TTSModel.load(tmp_path / "nowhere")


def test_bad_codes_for_the_codec(models):
    model = models["custom_voice"]
    with pytest.raises(InvalidInputError, match="shape"):
        model.decode([[1, 2, 3]])
    with pytest.raises(InvalidInputError, match=r"\[0, 2048\)"):
        model.decode([[4096] * 16])


def test_hub_id_found_in_the_local_cache_offline(checkpoint_dirs, monkeypatch, tmp_path):
    """A hub id resolves through huggingface_hub's cache layout without any network access."""
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--Example--Tiny-CustomVoice"
    shutil.copytree(checkpoint_dirs["custom_voice"], repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    model = Qwen3TTSModel.load("Example/Tiny-CustomVoice")
    assert model.directory == repo / "snapshots" / revision
    assert "vivian" in model.speakers


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
def test_cuda_requested_without_cuda(checkpoint_dirs):
    with pytest.raises(ConfigurationError, match="CUDA is not available"):
        Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], device="cuda")


def test_unknown_device_and_dtype(checkpoint_dirs):
    with pytest.raises(ConfigurationError, match="unknown device"):
        Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], device="tpu9")
    with pytest.raises(ConfigurationError, match="unknown dtype"):
        Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], dtype="float8")


def test_no_value_a_client_sent_is_echoed_whole(models, tmp_path):
    """A 100,000-character language was echoed twice in its 400 (a 200 KB body); every echoed value is shortened."""
    from in_process import make_app, run_in_app

    huge = "x" * 100_000
    body = {"model": "tts-1", "input": "Hello.", "voice": "vivian", "stream": False}

    async def requests(_, http):
        return [
            await http.post("/v1/audio/speech", json={**body, "language": huge}),
            await http.post("/v1/audio/speech", json={**body, "voice": huge}),
            await http.post("/v1/text-to-speech/vivian", json={"text": "Hi.", "language_code": huge}),
        ]

    app = make_app(models["custom_voice"], model_id="tiny", data_dir=tmp_path)
    for response in run_in_app(app, requests):
        assert response.status_code == 400 and len(response.content) < 2000, response.content[:300]
        assert "100002 characters" in response.json()["error"]["message"], "the length it had is said"
