"""`eval asr --dataset`: a `datasets` dataset's rows scored as a folder's recordings are. The datasets here are local
folders written by `datasets` itself (a hub id takes the same path through `load_dataset`, and tests are offline):
Parquet files with an audio column of encoded bytes, as the hub's speech sets are stored."""

from __future__ import annotations

import io
import json
import sys

import datasets
import huggingface_hub.constants
import numpy as np
import pytest
import soundfile as sf

from qwen3_tts_server.cli import main as cli_main
from qwen3_tts_server.testing.signals import voiced_glide

TEXTS = ["Good morning, how can I help?", "It costs $5 at 10:30.", "Thank you, goodbye."]
PITCHES = (110.0, 150.0, 190.0)


def encoded(pitch: float, form: str) -> bytes:
    out = io.BytesIO()
    sf.write(out, voiced_glide(1.5, 16000, pitch=pitch), 16000, format=form)
    return out.getvalue()


def write_split(folder, split: str, audio: list[dict], texts: list[str], text_column: str = "sentence") -> None:
    rows = datasets.Dataset.from_dict({"audio": audio, text_column: texts})
    rows = rows.cast_column("audio", datasets.Audio(decode=False))
    (folder / "data").mkdir(parents=True, exist_ok=True)
    rows.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """The same three recordings as a folder (NAME.txt beside each) and as a dataset's test split (in WAV and FLAC
    bytes, its transcripts under `sentence`), beside a train split that must not be read."""
    root = tmp_path_factory.mktemp("eval_dataset")
    folder, dataset = root / "folder", root / "dataset"
    folder.mkdir()
    audio = []
    for index, (pitch, text) in enumerate(zip(PITCHES, TEXTS, strict=True)):
        form = ("WAV", "FLAC")[index % 2]
        data = encoded(pitch, form)
        (folder / f"{index}.{form.lower()}").write_bytes(data)
        (folder / f"{index}.txt").write_text(text, encoding="utf-8")
        audio.append({"bytes": data, "path": f"clips/{index}.{form.lower()}"})
    write_split(dataset, "test", audio, TEXTS)
    write_split(dataset, "train", [{"bytes": b"not audio", "path": "x.wav"}], ["never read"])
    return {"folder": folder, "dataset": dataset, "root": root}


def report_of(folder) -> dict:
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))


def scored(report: dict) -> list[dict]:
    """Each sentence's scoring, without its id (a file's name in a folder, a row's number in a dataset)."""
    (setup,) = report["configurations"]
    return [{key: value for key, value in item.items() if key != "id"} for item in setup["sentences"]]


def test_a_datasets_rows_score_as_the_same_recordings_in_a_folder(both_families, recordings, tmp_path, capsys):
    asr = ["eval", "asr", "--model", str(both_families["asr"]), "--language", "en", "--precision", "float32"]
    assert cli_main([*asr, "--data", str(recordings["folder"]), "--limit", "2", "-o", str(tmp_path / "folder")]) == 0
    command = [*asr, "--dataset", str(recordings["dataset"]), "--limit", "2", "-o", str(tmp_path / "dataset")]
    assert cli_main(command) == 0
    from_folder, from_dataset = report_of(tmp_path / "folder"), report_of(tmp_path / "dataset")
    assert [item["id"] for item in from_dataset["configurations"][0]["sentences"]] == ["0", "1"]
    assert scored(from_dataset) == scored(from_folder) and len(scored(from_folder)) == 2
    assert [item["reference"] for item in scored(from_dataset)] == TEXTS[:2]
    assert from_dataset["recordings"] == f"2 from {recordings['dataset']} (its default configuration, split test), en"
    assert "datasets" in from_dataset["versions"]
    assert f"reading {recordings['dataset']}" in capsys.readouterr().err


def test_without_a_limit_the_whole_split_is_read_and_its_column_named(both_families, recordings, tmp_path):
    renamed = recordings["root"] / "renamed"
    write_split(renamed, "validation", [{"bytes": encoded(PITCHES[0], "WAV"), "path": None}], TEXTS[:1], "words")
    command = ["eval", "asr", "--model", str(both_families["asr"]), "--language", "en", "--precision", "float32"]
    assert cli_main([*command, "--dataset", str(recordings["dataset"]), "-o", str(tmp_path / "all")]) == 0
    assert len(scored(report_of(tmp_path / "all"))) == 3
    named = ["--dataset", str(renamed), "--split", "validation", "--text-column", "words"]
    assert cli_main([*command, *named, "-o", str(tmp_path / "named")]) == 0
    assert [item["reference"] for item in scored(report_of(tmp_path / "named"))] == TEXTS[:1]


def test_a_named_configuration_is_read_as_the_hub_lays_it_out(both_families, recordings, tmp_path):
    """LibriSpeech's layout on the hub: configurations named in README.md's card, each split's Parquet files in a
    folder of their own."""
    hub_like = recordings["root"] / "hub_like"
    audio = [{"bytes": encoded(pitch, "FLAC"), "path": f"{index}.flac"} for index, pitch in enumerate(PITCHES)]
    for config, texts in (("clean", TEXTS), ("other", TEXTS[::-1])):
        rows = datasets.Dataset.from_dict({"audio": audio, "text": texts}).cast_column("audio", datasets.Audio())
        (hub_like / config).mkdir(parents=True)
        rows.to_parquet(str(hub_like / config / "test-00000-of-00001.parquet"))
    card = "".join(
        f"- config_name: {config}\n  data_files:\n  - split: test\n    path: {config}/test-*.parquet\n"
        for config in ("clean", "other")
    )
    (hub_like / "README.md").write_text(f"---\nconfigs:\n{card}---\n", encoding="utf-8")
    command = ["eval", "asr", "--model", str(both_families["asr"]), "--language", "en", "--precision", "float32"]
    named = ["--dataset", str(hub_like), "--dataset-config", "other", "--split", "test", "--limit", "2"]
    assert cli_main([*command, *named, "-o", str(tmp_path / "other")]) == 0
    assert [item["reference"] for item in scored(report_of(tmp_path / "other"))] == TEXTS[::-1][:2]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--split", "validation"], "Bad split: validation. Available splits: ["),
        (["--dataset-config", "clean"], "BuilderConfig 'clean' not found"),
        (["--text-column", "transcript"], "no column 'transcript' (--text-column); its columns: audio, sentence"),
        (["--audio-column", "speech"], "no audio column 'speech' (--audio-column); its columns: audio, sentence"),
        (["--split", "train"], "row 0: "),
        (["--limit", "0"], "--limit is at least 1"),
        (["--language", "xx"], "--language is one of"),
    ],
)
def test_a_bad_dataset_or_column_is_named_before_any_model_loads(recordings, arguments, said, capsys):
    command = ["eval", "asr", "--model", "missing-model", "--language", "en", "--dataset", str(recordings["dataset"])]
    assert cli_main([*command, *arguments]) == 2
    assert said in capsys.readouterr().err


def test_a_dataset_without_a_usual_text_column_asks_for_one(recordings, capsys):
    unusual = recordings["root"] / "unusual"
    write_split(unusual, "test", [{"bytes": encoded(PITCHES[0], "WAV"), "path": None}], TEXTS[:1], "label")
    assert cli_main(["eval", "asr", "--model", "m", "--language", "en", "--dataset", str(unusual)]) == 2
    assert "name it with --text-column; its columns: audio, label" in capsys.readouterr().err


def test_an_unknown_hub_id_offline_is_refused_with_the_reason(capsys, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # as HF_HUB_OFFLINE=1 at start, the tests' own way
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    command = ["eval", "asr", "--model", "m", "--language", "en", "--dataset", "nobody/no-such-set"]
    assert cli_main([*command, "--dataset-revision", "v1.0"]) == 2
    said = capsys.readouterr().err
    assert "cannot load the dataset nobody/no-such-set (its default configuration, split test, revision v1.0)" in said
    assert "Couldn't reach 'nobody/no-such-set'" in said


def test_an_audio_folder_without_torchcodec_names_what_datasets_asks_for(tmp_path, monkeypatch, capsys):
    """`datasets` encodes a plain audio folder's files itself, with torchcodec: without it the command says so."""
    monkeypatch.setitem(sys.modules, "torchcodec", None)  # as if not installed
    sf.write(tmp_path / "a.wav", np.zeros(16000, dtype=np.float32), 16000)
    (tmp_path / "metadata.csv").write_text("file_name,transcription\na.wav,hello\n", encoding="utf-8")
    command = ["eval", "asr", "--model", "m", "--language", "en", "--dataset", str(tmp_path), "--split", "train"]
    assert cli_main(command) == 2
    said = capsys.readouterr().err
    assert "needs what `datasets` asks for" in said and "torchcodec" in said


def test_a_dataset_built_by_a_loading_script_is_refused_with_the_reason(tmp_path, capsys):
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "legacy.py").write_text("import datasets\n", encoding="utf-8")
    assert cli_main(["eval", "asr", "--model", "m", "--language", "en", "--dataset", str(tmp_path / "legacy")]) == 2
    said = capsys.readouterr().err
    assert "Dataset scripts are no longer supported, but found legacy.py" in said and "in Parquet" in said
