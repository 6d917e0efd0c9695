"""A Qwen3-ASR checkpoint in MODELS beside a speech model, or alone (engine/registry.py, server.build_registry):
hosted with its own recognition engine, its lifecycle and the memory budget shared with the speech models, listed
by /v1/models with its kind and languages. The tiny random-weight checkpoints of both families."""

from __future__ import annotations

import asyncio
import shutil

import pytest
import torch
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from qwen3_tts_server.config import Settings
from qwen3_tts_server.engine.recognition import RecognitionEngine
from qwen3_tts_server.engine.registry import HostedAligner, ModelRegistry, checkpoint_footprint
from qwen3_tts_server.engine.synthesis import Engine
from qwen3_tts_server.errors import ConfigurationError
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave
from qwen3_tts_server.model.checkpoint import weight_files
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16
from qwen3_tts_server.model.footprint import weight_bytes
from qwen3_tts_server.model.tts.loading import prepare_loading
from qwen3_tts_server.server import build_registry
from qwen3_tts_server.service.recognition.transcription import RecognitionService, TranscriptionRequest
from qwen3_tts_server.testing.live_server import free_port, live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_recognition_service import wav_bytes

ENV = {"MAX_REQUEST_FRAMES": "6", "TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0"}


def registry_of(*sources, **settings) -> ModelRegistry:
    config = Settings.load(models=",".join(map(str, sources)), device="cpu", **settings)
    return build_registry(config, "cpu", "float32", False)


def test_a_transcriber_is_hosted_beside_the_speech_model_and_lists_with_its_kind(both_families):
    speech = {"input": "Hello.", "voice": "ryan", "response_format": "wav"}
    with live_process("serve", both_families["speech"], "--model", str(both_families["asr"]), env=ENV) as live:
        http = live.client(timeout=300)
        listed = {entry["id"]: entry for entry in http.get("/v1/models").json()["data"]}
        spoken = http.post("/v1/audio/speech", json=speech)
        ready = http.get("/ready")
        health = http.get("/health").json()["models"]
        http.close()
    assert listed["speech"]["kind"] == "tts" and spoken.status_code == 200 and ready.status_code == 200
    languages = list(load_asr_checkpoint(both_families["asr"]).languages)
    assert listed["asr"] == {
        "id": "asr",
        "object": "model",
        "created": 0,
        "owned_by": "qwen3-tts-server",
        "kind": "asr",
        "languages": languages,
        "aligner": None,
        "state": "unloaded",
    }
    assert "English" in languages and len(languages) == 30
    assert {model_id: (report["kind"], report["state"]) for model_id, report in health.items()} == {
        "speech": ("tts", "ready"),
        "asr": ("asr", "unloaded"),
    }
    assert health["asr"]["footprint_bytes"] > 0 and health["asr"]["error"] is None


def test_the_registry_loads_the_transcriber_through_its_engine_within_the_memory_budget(both_families):
    """A budget that holds one model: transcribing unloads the idle speech model, speaking would unload the idle
    transcriber; the transcript is the one the transcriber gives offline."""
    speech_cost = checkpoint_footprint(both_families["speech"], prepare_loading(both_families["speech"]), torch.float32)
    registry = registry_of(both_families["speech"], both_families["asr"])
    registry.prepare()
    (recognizer,) = registry.recognizers
    offline = Transcriber(load_asr_checkpoint(both_families["asr"]))
    assert recognizer.kind == "asr" and recognizer.fingerprint == offline.model.fingerprint
    assert recognizer.footprint.own > 0 and [hosted.id for hosted in registry] == ["speech"]
    registry.budget = max(speech_cost.cost(), recognizer.footprint.cost()) + (1 << 20)
    registry.attach_engines(lambda manager: Engine(manager, max_batch_size=2), RecognitionEngine)
    registry.start()
    audio = wav_bytes(voiced_glide(1.0, pitch=140.0))
    try:
        registry.default.manager.get()  # the speech model takes the budget first
        transcript = asyncio.run(
            RecognitionService(recognizer.recognition_engine).transcribe(
                TranscriptionRequest(audio, "en", max_new_tokens=8)
            )
        )
        states = {hosted.id: hosted.manager.state.value for hosted in registry.every}
    finally:
        registry.stop()
    (expected,) = offline.transcribe([heard_wave(audio, "clip")], ["English"], max_new_tokens=8)
    assert (transcript.language, transcript.text, transcript.tokens) == ("English", expected.text, expected.tokens)
    assert states == {"speech": "unloaded", "asr": "ready"}


def test_a_forced_aligner_is_loaded_with_the_transcriber_and_counted_in_its_footprint(both_families):
    alone = registry_of(both_families["speech"], both_families["asr"])
    timed = registry_of(both_families["speech"], both_families["aligner"], both_families["asr"])
    alone.prepare()
    timed.prepare()
    (plain,), (recognizer,) = alone.recognizers, timed.recognizers
    aligner_bytes = sum(weight_bytes(f, torch.float32) for f in weight_files(both_families["aligner"]))
    assert [hosted.id for hosted in timed.every] == ["speech", "asr"]
    assert recognizer.aligner == HostedAligner("aligner", both_families["aligner"])
    assert recognizer.footprint.own == plain.footprint.own + aligner_bytes
    assert recognizer.manager.get().aligner is not None and plain.aligner is None


def test_a_forced_aligner_times_speech_beside_speech_models_alone_and_a_second_one_is_refused(both_families):
    """Beside a transcriber, speech is timed by the transcriber's aligner (one copy loaded); beside speech models
    alone, the aligner is hosted by itself and loads when first asked; alone it has nothing to time."""
    timed = registry_of(both_families["speech"], both_families["aligner"], both_families["asr"])
    assert timed.speech_aligner is timed.recognizers[0].manager
    speech_only = registry_of(both_families["speech"], both_families["aligner"])
    assert not speech_only.recognizers and speech_only.speech_aligner.loaded is None
    assert speech_only.speech_aligner.get().checkpoint.kind == "forced_aligner"
    assert registry_of(both_families["speech"]).speech_aligner is None
    with pytest.raises(ConfigurationError, match="ForcedAligner .*aligner alone"):
        registry_of(both_families["aligner"])
    copy = both_families["aligner"].parent / "aligner-copy"
    if not copy.exists():
        shutil.copytree(both_families["aligner"], copy)
    with pytest.raises(ConfigurationError, match="2 ForcedAligner checkpoints"):
        registry_of(both_families["speech"], both_families["asr"], both_families["aligner"], copy)


def test_a_server_of_recognisers_alone_answers_as_the_earlier_asr_server_and_refuses_speech(both_families):
    """MODELS with a transcriber and its aligner only: the earlier ASR server's /health keys speak of the
    transcriber (null until it loads, its MODELS entry after), it transcribes, speech requests are a 404 naming
    `model`, and Wyoming describes a recogniser and no speech program."""
    port = free_port()
    asr, aligner = str(both_families["asr"]), str(both_families["aligner"])
    env = {**ENV, "QUANTIZE": "auto"}  # the default: w8a8 for a transcriber on a CPU
    with live_process("serve", asr, "--model", aligner, "--wyoming-port", str(port), env=env) as live:
        http = live.client(timeout=300)
        before = http.get("/health").json()
        listed = [entry["id"] for entry in http.get("/v1/models").json()["data"]]
        ready = http.get("/ready")
        clip = ("a.wav", wav_bytes(voiced_glide(0.8, pitch=150.0)))
        heard = http.post("/v1/audio/transcriptions", files={"file": clip}, data={"language": "en"})
        after = http.get("/health").json()
        spoken = http.post("/v1/audio/speech", json={"input": "Hello.", "voice": "ryan"})
        voices = http.get("/v1/audio/voices")
        metrics = http.get("/metrics").text
        http.close()
        described = asyncio.run(describe_over_wyoming(port))
    assert {key: before[key] for key in ("status", "model_loaded", "model_id", "cuda")} == {
        "status": "ok",
        "model_loaded": False,
        "model_id": None,
        "cuda": False,
    }
    assert listed == ["asr"] and ready.status_code == 200 and ready.json()["model"] == "unloaded"
    assert heard.status_code == 200 and heard.json()["usage"]["type"] == "duration"
    assert (after["model_loaded"], after["model_id"], after["model"]["type"], after["model"]["state"]) == (
        True,
        asr,
        "asr",
        "ready",
    )
    # QUANTIZE auto: w8a8, with bfloat16 activations where this CPU multiplies bfloat16
    assert after["model"]["dtype"] == ("bfloat16" if cpu_multiplies_bfloat16() else "float32")
    assert after["model"]["quantization"] == "w8a8"
    assert after["model"]["precision"].startswith("QUANTIZE auto on a CPU: w8a8")
    assert (before["cuda_graphs"], after["cuda_graphs"]) == (None, "off")  # the token step's graphs: CUDA only
    assert spoken.status_code == 404 and spoken.json()["error"]["param"] == "model"
    assert spoken.json()["error"]["message"].startswith("no speech model is hosted")
    assert voices.status_code == 200 and voices.json()["data"] == []  # no presets, an empty library
    assert 'qwen3_tts_queue_depth{model="asr"} 0.0' in metrics
    assert described.tts == [] and [model.name for model in described.asr[0].models] == ["asr"]


async def describe_over_wyoming(port: int) -> Info:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Describe().event())
        while True:
            event = await client.read_event()
            if event is not None and Info.is_type(event.type):
                return Info.from_event(event)


def test_a_transcriber_that_fails_to_load_makes_the_server_not_ready_naming_it(both_families, tmp_path):
    broken = tmp_path / "asr"
    shutil.copytree(both_families["asr"], broken)
    with live_process("serve", both_families["speech"], "--model", str(broken), env=ENV) as live:
        (broken / "model.safetensors").write_bytes(b"not weights")  # after the start's checks
        http = live.client(timeout=300)
        failed = http.post("/v1/audio/transcriptions", files={"file": ("a.wav", wav_bytes(voiced_glide(0.5)))})
        ready = http.get("/ready")
        http.close()
    assert failed.status_code >= 500 and ready.status_code == 503
    report = ready.json()
    assert report["error"].startswith("asr: cannot read weights") and set(report["models"]) == {"speech", "asr"}
