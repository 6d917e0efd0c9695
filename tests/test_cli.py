"""The `qwen3-tts-server` command end to end, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from qwen3_tts_server import __version__
from qwen3_tts_server.testing.live_server import live_server

pytestmark = pytest.mark.slow


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "qwen3_tts_server", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def test_version_is_the_package_version():
    printed = run("--version")
    assert printed.returncode == 0 and printed.stdout.strip() == f"qwen3-tts-server {__version__}"


def test_make_test_model_is_deterministic(tmp_path):
    first = run("make-test-model", str(tmp_path / "a"), "--type", "voice_design", "--seed", "5")
    second = run("make-test-model", str(tmp_path / "b"), "--type", "voice_design", "--seed", "5")
    assert first.returncode == second.returncode == 0, first.stderr
    for name in ("config.json", "model.safetensors", "speech_tokenizer/model.safetensors", "vocab.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_synth_writes_audio_and_codes(checkpoint_dirs, tmp_path):
    out, codes_out = tmp_path / "speech.wav", tmp_path / "codes.npy"
    result = run(
        "synth",
        "--model",
        str(checkpoint_dirs["custom_voice"]),
        "--text",
        "Good morning, how are you today?",
        "--speaker",
        "Ryan",
        "--language",
        "English",
        "--seed",
        "11",
        "-o",
        str(out),
        "--codes-out",
        str(codes_out),
    )
    assert result.returncode == 0, result.stderr
    codes = np.load(codes_out)
    assert codes.dtype == np.int64 and codes.ndim == 2 and codes.shape[1] == 16 and len(codes) >= 2
    audio, rate = sf.read(out)
    assert rate == 24000 and audio.shape == (len(codes) * 1920,)
    assert np.sqrt(np.mean(audio**2)) > 0.01
    assert f"({len(codes)} frames)" in result.stderr


def test_synth_greedy_matches_the_library_and_reads_text_files(checkpoint_dirs, models, tmp_path):
    from qwen3_tts_server.model.tts.prompt import SpeechInput

    text_file = tmp_path / "text.txt"
    text_file.write_text("巴适得很，走嘛。\n", encoding="utf-8")
    codes_out = tmp_path / "codes.npy"
    result = run(
        "synth",
        "--model",
        str(checkpoint_dirs["custom_voice"]),
        "--text-file",
        str(text_file),
        "--speaker",
        "eric",
        "--greedy",
        "--max-frames",
        "20",
        "-o",
        str(tmp_path / "x.wav"),
        "--codes-out",
        str(codes_out),
    )
    assert result.returncode == 0, result.stderr
    model = models["custom_voice"]
    expected = model.generate([SpeechInput("巴适得很，走嘛。", "auto", "eric")], model.sampling().greedy(), 20)[0]
    np.testing.assert_array_equal(np.load(codes_out), expected.codes)


def test_synth_warns_when_the_budget_cuts_speech(checkpoint_dirs, tmp_path):
    result = run(
        "synth",
        "--model",
        str(checkpoint_dirs["voice_design"]),
        "--text",
        "A long sentence to speak here.",
        "--instruct",
        "Calm narrator.",
        "--greedy",
        "--max-frames",
        "3",
        "-o",
        str(tmp_path / "x.wav"),
    )
    assert result.returncode == 0, result.stderr
    assert "warning: stopped at the frame budget (3 frames)" in result.stderr


def test_synth_writes_subtitles_of_the_text_timed_in_its_audio(both_families, tmp_path):
    """With --subtitles srt and vtt, SubRip and WebVTT files beside the WAV show the text as written, in order,
    every cue inside the audio; without --aligner, a clear error before anything is made."""
    out = tmp_path / "narration.wav"
    text = "Hello there, my friend. It costs $5 today! Goodbye now."
    common = ("synth", "--model", str(both_families["speech"]), "--speaker", "ryan", "--text", text, "--seed", "3")
    made = run(*common, "--subtitles", "srt", "--subtitles", "vtt", "--aligner", str(both_families["aligner"]),
               "--max-frames", "30", "-o", str(out))  # fmt: skip
    assert made.returncode == 0, made.stderr
    seconds = len(sf.read(out)[0]) / 24000
    srt, vtt = out.with_suffix(".srt").read_text(), out.with_suffix(".vtt").read_text()
    assert vtt.startswith("WEBVTT\n")
    cues = [block.splitlines() for block in srt.strip().split("\n\n")]
    assert [cue[0] for cue in cues] == [str(n) for n in range(1, len(cues) + 1)]
    assert " ".join(" ".join(cue[2:]) for cue in cues) == text  # the client's words, punctuation and "$5" kept

    def seconds_of(clock: str) -> float:
        hours, minutes, rest = clock.replace(",", ".").split(":")
        return 3600 * int(hours) + 60 * int(minutes) + float(rest)

    times = [[seconds_of(clock) for clock in cue[1].split(" --> ")] for cue in cues]
    assert all(start <= end <= seconds + 0.001 for start, end in times)
    assert [start for start, _ in times] == sorted(start for start, _ in times)
    refused = run(*common, "--subtitles", "srt", "-o", str(tmp_path / "x.wav"))
    assert refused.returncode == 2 and "--subtitles needs --aligner" in refused.stderr


def test_synth_errors_are_one_clear_line(checkpoint_dirs, tmp_path):
    result = run("synth", "--model", str(checkpoint_dirs["custom_voice"]), "--text", "hi", "--speaker", "zed")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: unknown speaker 'zed'") and "Traceback" not in result.stderr
    missing = run("synth", "--model", str(tmp_path / "none"), "--text", "hi")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    no_file = run("synth", "--model", str(checkpoint_dirs["custom_voice"]), "--text-file", str(tmp_path / "no.txt"))
    assert no_file.returncode == 2 and "cannot read --text-file" in no_file.stderr


def test_synth_clones_from_a_file_and_reuses_the_saved_prompt(checkpoint_dirs, tmp_path):
    from parity_cases import REF_TEXT, write_reference

    ref = write_reference(tmp_path, "ref_44k_stereo.wav")
    base = str(checkpoint_dirs["base"])
    first, second = tmp_path / "first.npy", tmp_path / "second.npy"
    common = (
        "--text",
        "Cloned speech from the command line.",
        "--language",
        "English",
        "--greedy",
        "--max-frames",
        "10",
    )
    made = run(
        "synth",
        "--model",
        base,
        "--ref-audio",
        str(ref),
        "--ref-text",
        REF_TEXT[ref.name],
        "--save-voice-prompt",
        str(tmp_path / "voice"),
        "-o",
        str(tmp_path / "a.wav"),
        "--codes-out",
        str(first),
        *common,
    )
    assert made.returncode == 0, made.stderr
    assert "cloned voice voice_" in made.stderr and "(in_context)" in made.stderr
    reused = run(
        "synth",
        "--model",
        base,
        "--voice-prompt",
        str(tmp_path / "voice"),
        "-o",
        str(tmp_path / "b.wav"),
        "--codes-out",
        str(second),
        *common,
    )
    assert reused.returncode == 0, reused.stderr
    np.testing.assert_array_equal(np.load(first), np.load(second))
    audio, rate = sf.read(tmp_path / "b.wav")
    assert rate == 24000 and len(audio) == len(np.load(second)) * 1920


def test_synth_clone_errors(checkpoint_dirs, tmp_path):
    from parity_cases import write_reference

    ref = write_reference(tmp_path, "ref_16k_mono.wav")
    no_text = run("synth", "--model", str(checkpoint_dirs["base"]), "--text", "hi", "--ref-audio", str(ref))
    assert no_text.returncode == 2 and "needs ref_text" in no_text.stderr
    wrong_model = run(
        "synth",
        "--model",
        str(checkpoint_dirs["custom_voice"]),
        "--text",
        "hi",
        "--speaker",
        "vivian",
        "--ref-audio",
        str(ref),
        "--x-vector-only",
    )
    assert wrong_model.returncode == 2 and "needs a Base checkpoint" in wrong_model.stderr
    not_audio = tmp_path / "notes.txt"
    not_audio.write_text("hello")
    bad = run(
        "synth",
        "--model",
        str(checkpoint_dirs["base"]),
        "--text",
        "hi",
        "--ref-audio",
        str(not_audio),
        "--x-vector-only",
    )
    assert bad.returncode == 2 and "is not audio in a format this server reads" in bad.stderr


def test_bench_reports_every_level_and_plots(tmp_path):
    import json

    out = tmp_path / "bench.json"
    args = ("--concurrency", "1", "3", "--frames", "4", "--quantize", "auto", "--out", str(out))
    result = run("bench", "--size", "tiny", *args)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    # --quantize auto: what serve gives a speech model on a CPU, and why
    assert report["meta"]["quantize"] == "w8a8" and report["meta"]["precision"].startswith("QUANTIZE auto on a CPU")
    assert [row["concurrency"] for row in report["results"]] == [1, 3]
    for row in report["results"]:
        assert row["frames_per_stream"] == 4 and row["ttfa_p50_ms"] > 0 and row["aggregate_rtf"] > 0
        assert row["ttfa_p95_ms"] >= row["ttfa_p50_ms"]
    png = out.with_suffix(".png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_bench_refuses_a_bad_peer_before_it_runs(tmp_path):
    for spec, message in [
        ("nobody=/usr/bin/python3", "NAME one of official, faster"),
        ("official", "give NAME=PATH"),
        ("faster=/no/such/site", "no such interpreter or folder"),
    ]:
        result = run("bench", "--size", "tiny", "--frames", "2", "--peer", spec, "--out", str(tmp_path / "b.json"))
        assert result.returncode == 2 and message in result.stderr, (spec, result.stderr)
        assert not (tmp_path / "b.json").exists()


def test_a_peer_that_fails_keeps_our_figures(tmp_path):
    """A peer folder without the peer's packages: the error names the peer, our levels are still written."""
    import json

    empty, out = tmp_path / "site", tmp_path / "bench.json"
    empty.mkdir()
    result = run(
        "bench", "--size", "tiny", "--concurrency", "1", "--frames", "2", "--peer", f"faster={empty}", "--out", str(out)
    )
    assert result.returncode == 1 and "peer faster failed" in result.stderr and "faster_qwen3_tts" in result.stderr
    report = json.loads(out.read_text())
    assert [row["concurrency"] for row in report["results"]] == [1] and "peers" not in report


def test_peer_ratios_follow_one_request_at_a_time():
    """A peer that serves one request at a time: at N streams its aggregate is its one-stream speed and the
    k-th request waits for k whole requests before its first audio."""
    from qwen3_tts_server.bench.peers import PeerResult
    from qwen3_tts_server.bench.streams import LevelResult, peer_ratios

    peer = PeerResult(
        "faster", "0.5.4", frames=50, runs=3, ttfa_p50_ms=200.0, request_p50_ms=2000.0, rtf_p50=2.0, gpu_memory_gib=None
    )
    levels = [LevelResult(n, 50, 20.0, 30.0, 10.0, 9.0, 10.0 * n, 1.0, 0.0) for n in (1, 4)]
    one, four = peer_ratios(levels, peer)
    assert one == {"concurrency": 1, "aggregate_x": 5.0, "peer_ttfa_p50_ms": 200.0, "ttfa_p50_x": 10.0}
    # 2 s per request (4 s of audio at 2x): first audio at 0.2, 2.2, 4.2 and 6.2 s; nearest-rank median 4.2 s
    assert four == {"concurrency": 4, "aggregate_x": 20.0, "peer_ttfa_p50_ms": 4200.0, "ttfa_p50_x": 210.0}


def test_serve_streams_over_loopback(checkpoint_dirs):
    import time

    import openai

    with live_server(checkpoint_dirs["custom_voice"]) as base:
        client = openai.OpenAI(api_key="unused", base_url=f"{base}/v1")
        arrivals, parts = [], []
        with client.audio.speech.with_streaming_response.create(
            model="tts-1",
            voice="Vivian",
            input="A longer sentence so that the stream has many chunks in it.",
            response_format="pcm",
            extra_body={"seed": 9},
        ) as response:
            for part in response.iter_bytes():
                arrivals.append(time.monotonic())
                parts.append(part)
        assert len(parts) > 3 and arrivals[-1] - arrivals[0] > 0.2, "audio must arrive while it is generated"
        assert len(b"".join(parts)) % (1920 * 2) == 0


def test_synth_speaks_long_text_in_segments_and_normalizes_unless_told_not_to(checkpoint_dirs, tmp_path):
    sentence = "On 2024-01-15 the shop sold 1,234 books at $12 each, which was a record for the whole year."
    out, codes_out = tmp_path / "long.wav", tmp_path / "codes.npy"
    args = ["synth", "--model", str(checkpoint_dirs["custom_voice"]), "--speaker", "Ryan", "--seed", "2"]
    result = run(
        *args, "--text", " ".join([sentence] * 8), "--max-frames", "3", "-o", str(out), "--codes-out", str(codes_out)
    )
    assert result.returncode == 0, result.stderr
    codes = np.load(codes_out)
    audio, _ = sf.read(out)
    assert ", 3 segments)" in result.stderr and len(codes) == 9 and audio.shape == (9 * 1920,)
    assert result.stderr.count("stopped at the frame budget") == 3 and "segment 3 of 3" in result.stderr
    verbatim = run(
        *args, "--text", sentence, "--greedy", "--no-normalize", "-o", str(out), "--codes-out", str(codes_out)
    )
    verbatim_codes = np.load(codes_out)
    spoken = run(
        *args, "--text", sentence, "--greedy", "--max-frames", "8", "-o", str(out), "--codes-out", str(codes_out)
    )
    assert verbatim.returncode == spoken.returncode == 0
    assert not np.array_equal(verbatim_codes, np.load(codes_out)), "the model must be given different text"


def test_synth_with_several_models_speaks_with_the_one_the_voice_asks_for(checkpoint_dirs, models, tmp_path):
    """A preset speaker goes to the CustomVoice model, a description alone to the VoiceDesign one: the codes are the
    ones each model gives alone."""
    from qwen3_tts_server.model.tts.prompt import SpeechInput

    hosted = ["--model", str(checkpoint_dirs["voice_design"]), "--model", str(checkpoint_dirs["custom_voice"])]
    cases = {
        "custom_voice": (["--speaker", "eric"], SpeechInput("Routed.", "auto", "eric")),
        "voice_design": (["--instruct", "Calm narrator."], None),
    }
    for name, (voice, request) in cases.items():
        codes_out = tmp_path / f"{name}.npy"
        out = ["-o", str(tmp_path / f"{name}.wav"), "--codes-out", str(codes_out)]
        result = run("synth", *hosted, "--text", "Routed.", *voice, "--greedy", "--max-frames", "6", *out)
        assert result.returncode == 0, result.stderr
        assert f"speaking with {checkpoint_dirs[name]}" in result.stderr
        model = models[name]
        request = request or SpeechInput("Routed.", "auto", instruct="Calm narrator.")
        expected = model.generate([request], model.sampling().greedy(), 6)[0]
        np.testing.assert_array_equal(np.load(codes_out), expected.codes)
