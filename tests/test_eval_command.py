"""`qwen3-tts-server eval` end to end on tiny random-weight models: their error rates mean nothing (random weights
say random things), so the mechanics are checked: every precision asked for side by side, the same seeds giving the
same speech and so the same scores, the rates the sentences' own edits add up to, a clone compared with its
reference, a folder of recordings scored, and the report's files (JSON, Markdown, the plot)."""

from __future__ import annotations

import dataclasses
import io
import json
import sys

import pytest
import soundfile as sf

from qwen3_tts_server.cli import main as cli_main
from qwen3_tts_server.eval.sentences import sentence_set
from qwen3_tts_server.eval.speech import configuration, evaluate
from qwen3_tts_server.testing.random_checkpoint import make_test_model
from qwen3_tts_server.testing.signals import voiced_glide

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    return make_test_model(tmp_path_factory.mktemp("eval") / "base", "tiny", "base")


def report_of(folder) -> dict:
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))


def test_eval_speech_reports_each_precision_side_by_side(both_families, tmp_path, capsys):
    out = tmp_path / "report"
    speech, asr = str(both_families["speech"]), str(both_families["asr"])
    command = ["eval", "speech", "--model", speech, "--asr", asr, "--languages", "en,zh", "--per-language", "2"]
    assert cli_main([*command, "--precision", "float32", "--precision", "float32:int8", "-o", str(out)]) == 0
    report = report_of(out)
    assert report["kind"] == "speech" and report["command"].startswith("qwen3-tts-server eval speech --model")
    assert {"qwen3-tts-server", "torch", "jiwer", "python"} <= set(report["versions"])
    assert report["sentence set"] == f"version {sentence_set().version}, 4 sentences"
    first, second = report["configurations"]
    assert (first["label"], first["dtype"], first["quantize"]) == ("float32", "float32", None)
    assert (second["label"], second["dtype"], second["quantize"]) == ("float32:int8", "float32", "int8")
    for setup in (first, second):
        assert [item["id"] for item in setup["sentences"]] == ["en-01", "en-02", "zh-01", "zh-02"]
        errors = sum(item["errors"] for item in setup["sentences"])
        units = sum(item["units"] for item in setup["sentences"])
        rate = setup["error_rate"]
        assert rate["rate"] == pytest.approx(errors / units) and rate["low"] <= rate["rate"] <= rate["high"]
        assert {code: entry["metric"] for code, entry in setup["by_language"].items()} == {"en": "WER", "zh": "CER"}
        assert setup["real_time_factor"] > 0
    table = (out / "report.md").read_text(encoding="utf-8")
    assert "| configuration | all | en (WER) | zh (CER) | real_time_factor |" in table
    assert "| float32 |" in table and "| float32:int8 |" in table
    assert (out / "report.png").read_bytes().startswith(PNG)
    assert "Round-trip error rate of speech" in capsys.readouterr().out


def test_identical_configurations_give_identical_speech_and_scores(both_families):
    setup = configuration("float32", "cpu")
    again = dataclasses.replace(setup, label="again")
    chosen = sentence_set(["en", "ja"], 1).sentences
    rows = evaluate(str(both_families["speech"]), str(both_families["asr"]), [setup, again], chosen)
    assert [item.hypothesis for item in rows[0].scored] == [item.hypothesis for item in rows[1].scored]
    assert rows[0].overall == rows[1].overall and rows[0].by_language == rows[1].by_language


def test_a_clone_is_scored_and_compared_with_its_reference(base_model, both_families, tmp_path):
    reference = tmp_path / "reference.wav"
    sf.write(reference, voiced_glide(3.0, 24000, pitch=120.0), 24000)
    out = tmp_path / "clone"
    command = ["eval", "speech", "--model", str(base_model), "--asr", str(both_families["asr"]), "--languages", "de"]
    clone = ["--ref-audio", str(reference), "--ref-text", "Hallo, wie geht es dir?", "--per-language", "2"]
    assert cli_main([*command, *clone, "--precision", "float32", "-o", str(out)]) == 0
    (setup,) = report_of(out)["configurations"]
    assert -1.0 <= setup["lowest_similarity"] <= setup["speaker_similarity"] <= 1.0
    assert report_of(out)["clone of"] == str(reference)


def test_without_a_recording_the_set_makes_its_own_reference_with_a_preset_speaker(base_model, both_families, tmp_path):
    out = tmp_path / "own"
    command = ["eval", "speech", "--model", str(base_model), "--asr", str(both_families["asr"]), "--languages", "it"]
    own = ["--ref-from", str(both_families["speech"]), "--per-language", "1", "--precision", "float32"]
    assert cli_main([*command, *own, "-o", str(out)]) == 0
    report = report_of(out)
    assert report["clone of"] == f"the set's reference sentence, said by {both_families['speech']}"
    (setup,) = report["configurations"]
    assert -1.0 <= setup["speaker_similarity"] <= 1.0 and [item["id"] for item in setup["sentences"]] == ["it-01"]


def test_a_designed_voice_speaks_the_set(both_families, tmp_path):
    designer = make_test_model(tmp_path / "design", "tiny", "voice_design")
    out = tmp_path / "design-report"
    command = ["eval", "speech", "--model", str(designer), "--asr", str(both_families["asr"]), "--languages", "fr"]
    voice = ["--instruct", "A calm, low voice.", "--per-language", "1", "--precision", "float32"]
    assert cli_main([*command, *voice, "-o", str(out)]) == 0
    (setup,) = report_of(out)["configurations"]
    assert [item["id"] for item in setup["sentences"]] == ["fr-01"]


def test_eval_asr_scores_a_folder_of_recordings_in_each_precision(both_families, tmp_path):
    data = tmp_path / "recordings"
    data.mkdir()
    for name, pitch in (("one", 110.0), ("two", 150.0)):
        sf.write(data / f"{name}.wav", voiced_glide(1.5, 16000, pitch=pitch), 16000)
        (data / f"{name}.txt").write_text("Good morning, how can I help?", encoding="utf-8")
    out = tmp_path / "asr"
    command = ["eval", "asr", "--model", str(both_families["asr"]), "--data", str(data), "--language", "en"]
    assert cli_main([*command, "--precision", "float32", "--precision", "float32:int8", "-o", str(out)]) == 0
    report = report_of(out)
    assert [setup["label"] for setup in report["configurations"]] == ["float32", "float32:int8"]
    for setup in report["configurations"]:
        assert [item["id"] for item in setup["sentences"]] == ["one", "two"]
        assert all(item["units"] == 6 for item in setup["sentences"])
        assert setup["by_language"]["en"]["metric"] == "WER" and setup["real_time_factor"] > 0


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["speech", "--languages", "xx"], "no sentences in xx"),
        (["speech", "--precision", "float32:int3"], "configuration 'float32:int3'"),
        (["speech", "--per-language", "0"], "--per-language is at least 1"),
        (["speech", "--ref-text", "Hi."], "--ref-text and --x-vector-only go with --ref-audio"),
        (["speech", "--ref-from", "m", "--ref-audio", "a.wav"], "give --ref-from or --ref-audio"),
        (["asr", "--data", "nowhere", "--language", "en"], "nowhere is not a folder"),
        (["asr", "--data", ".", "--language", "xx"], "--language is one of"),
    ],
)
def test_bad_arguments_are_refused_before_any_model_loads(arguments, said, capsys):
    kind, *rest = arguments
    model = ["--model", "missing-model"] + (["--asr", "missing-asr"] if kind == "speech" else [])
    assert cli_main(["eval", kind, *model, *rest]) == 2
    assert said in capsys.readouterr().err


def test_a_recording_without_its_text_is_named(both_families, tmp_path, capsys):
    sf.write(tmp_path / "alone.wav", voiced_glide(1.0, 16000), 16000)
    command = ["eval", "asr", "--model", str(both_families["asr"]), "--data", str(tmp_path), "--language", "en"]
    assert cli_main(command) == 2
    assert "no text (NAME.txt) beside alone.wav" in capsys.readouterr().err


def test_without_the_eval_extra_the_command_names_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jiwer", None)  # as if not installed
    for module in [name for name in sys.modules if name.startswith("qwen3_tts_server.eval.")]:
        monkeypatch.delitem(sys.modules, module)
    assert cli_main(["eval", "asr", "--model", "m", "--data", ".", "--language", "en"]) == 2
    assert "pip install 'qwen3-tts-server[eval]' (jiwer is missing)" in capsys.readouterr().err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_work_is_shown_as_it_goes(both_families, tmp_path, monkeypatch):
    shown = Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    command = ["eval", "speech", "--model", str(both_families["speech"]), "--asr", str(both_families["asr"])]
    assert (
        cli_main([*command, "--languages", "en", "--per-language", "2", "--precision", "float32", "-o", str(tmp_path)])
        == 0
    )
    bars = shown.getvalue()
    assert "speaking (float32): 100%" in bars and "2/2 [" in bars and "s a second of speech" in bars
    assert "transcribing: 0token [" in bars  # (redrawn as it goes at most every 0.1 s: a tiny model's may not be)
