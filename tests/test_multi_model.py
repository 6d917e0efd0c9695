"""Several checkpoints in one server (MODELS): each request goes to the model its `model` and voice route it to,
the models load on their own, and /v1/models, /v1/audio/voices and /health say what is hosted."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import shutil
import time
import wave
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import httpx
import openai
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from parity_cases import write_reference
from qwen3_tts_server.config import Settings
from qwen3_tts_server.engine.model_manager import BESIDE_OTHERS_NICENESS, ModelManager, ModelState
from qwen3_tts_server.engine.registry import Footprint, HostedModel, ModelRegistry, checkpoint_footprint
from qwen3_tts_server.errors import (
    CheckpointError,
    ConfigurationError,
    InvalidInputError,
    ModelWaitError,
    UnknownVoiceError,
)
from qwen3_tts_server.model.tts.loading import prepare_loading
from qwen3_tts_server.server import build_registry
from qwen3_tts_server.service.recognition.routing import route_recognizer
from qwen3_tts_server.service.speech.routing import route
from qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary
from qwen3_tts_server.testing.live_server import free_port, live_process
from qwen3_tts_server.testing.random_checkpoint import make_test_model

pytestmark = pytest.mark.slow

ENV = {"MAX_REQUEST_FRAMES": "6", "TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0"}


def frames_of(body: bytes) -> int:
    with wave.open(io.BytesIO(body)) as audio:
        return audio.getnframes()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """The three types, their speech tokenizer files byte for byte alike, as the published checkpoints' are."""
    root = tmp_path_factory.mktemp("hosted")
    return {kind: make_test_model(root / kind, "tiny", kind) for kind in ("custom_voice", "base", "voice_design")}


@pytest.fixture(scope="module")
def server(checkpoints):
    extra = ("--model", str(checkpoints["base"]), "--model", str(checkpoints["voice_design"]))
    wyoming_port = free_port()
    env = {**ENV, "WYOMING_PORT": str(wyoming_port), "WYOMING_ZEROCONF": "false"}
    with live_process("serve", checkpoints["custom_voice"], *extra, env=env) as live:
        live.wyoming_port = wyoming_port
        yield live


def states(live) -> dict[str, str]:
    return {model_id: report["state"] for model_id, report in live.health()["models"].items()}


def test_each_voice_goes_to_the_model_that_speaks_it(server, tmp_path):
    cv, base, vd = "custom_voice", "base", "voice_design"  # the directories' names
    assert states(server) == {cv: "unloaded", base: "unloaded", vd: "unloaded"}
    with server.client(timeout=300) as http:
        listed = {entry["id"]: entry for entry in http.get("/v1/models").json()["data"]}
        assert {listed[cv]["type"], listed[base]["type"], listed[vd]["type"]} == {
            "custom_voice",
            "base",
            "voice_design",
        }
        assert listed["tts-1"]["alias_of"] == cv  # the default voice is a preset speaker

        # A preset speaker and an OpenAI voice, with a model name that names nothing hosted: the CustomVoice model.
        for body in ({"input": "Hello.", "voice": "vivian"}, {"model": "kokoro", "input": "Hi.", "voice": "alloy"}):
            answer = http.post("/v1/audio/speech", json={**body, "response_format": "wav", "seed": 1})
            assert answer.status_code == 200, answer.text
            assert frames_of(answer.content) > 0
        assert states(server) == {cv: "ready", base: "unloaded", vd: "unloaded"}

        # An inline clone: the Base model.
        reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()
        cloned = http.post(
            "/v1/audio/speech/clone", data={"input": "Cloned.", "seed": "1"}, files={"file": ("r.wav", reference)}
        )
        assert cloned.status_code == 200, cloned.text
        assert frames_of(cloned.content) > 0
        assert states(server)[base] == "ready"

        # A designed voice: the VoiceDesign model; its short name picks it too.
        made = http.post("/v1/audio/voices", data={"name": "narrator", "type": "prompt", "prompt": "A calm voice."})
        assert made.status_code in (200, 201), made.text
        voice_id = made.json()["id"]
        designed = http.post(
            "/v1/audio/speech", json={"input": "Designed.", "voice": voice_id, "response_format": "wav"}
        )
        assert designed.status_code == 200, designed.text
        assert states(server)[vd] == "ready"

        voices = {voice["id"]: voice for voice in http.get("/v1/audio/voices").json()["data"]}
        assert voices["vivian"]["models"] == [cv] and voices[voice_id]["models"] == [vd]
        health = server.health()
        assert health["shared"][0]["models"] == [cv, base, vd]  # one speech tokenizer file, loaded once

        # A library voice no hosted model can speak as asked: a clear 400 naming what is hosted.
        unknown = http.post("/v1/audio/speech", json={"input": "Hi.", "voice": "nobody_at_all"})
        assert unknown.status_code == 400 and cv in unknown.json()["error"]["message"]


def test_an_uploaded_sample_is_cloned_by_the_base_model_the_upload_names(checkpoints, tmp_path):
    """Two Base checkpoints: `model` on POST /v1/audio/voices picks which clones (a clone prompt belongs to its
    checkpoint), the voice is then spoken by that one, and a model that cannot clone says so."""
    other = make_test_model(tmp_path / "base-b", "tiny", "base", seed=3)
    reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()
    extra = ("--model", str(other), "--model", str(checkpoints["custom_voice"]))
    with live_process("serve", checkpoints["base"], *extra, env=ENV) as live, live.client(timeout=300) as http:

        def upload(name: str, **fields: str) -> httpx.Response:
            data = {"name": name, "ref_text": "Reference words.", **fields}
            return http.post("/v1/audio/voices", data=data, files={"audio_sample": ("r.wav", reference)})

        made = {"first": upload("first"), "second": upload("second", model="base-b"), "hd": upload("hd", model="x")}
        assert all(answer.status_code in (200, 201) for answer in made.values()), [a.text for a in made.values()]
        voices = {voice["name"]: voice for voice in http.get("/v1/audio/voices").json()["data"]}
        assert [voices[name]["models"] for name in ("first", "second", "hd")] == [["base"], ["base-b"], ["base"]]
        for name, model_id in (("first", "base"), ("second", "base-b")):
            spoken = http.post("/v1/audio/speech", json={"input": "Hi.", "voice": made[name].json()["id"]})
            assert spoken.status_code == 200 and spoken.headers["x-model"] == model_id, spoken.text
        refused = upload("third", model="custom_voice")
        assert refused.status_code == 400 and "clon" in refused.json()["error"]["message"], refused.text
        assert "third" not in {voice["name"] for voice in http.get("/v1/audio/voices").json()["data"]}


def test_every_path_routes_alike(server):
    """The openai SDK, the earlier server's SSE and PCM routes, the WebSocket per utterance and Wyoming's voice
    list: each the same rules, the answer saying which model spoke (X-Model)."""
    client = openai.OpenAI(api_key="unused", base_url=server.base + "/v1")
    answer = client.audio.speech.with_raw_response.create(
        model="tts-1", voice="alloy", input="Through the SDK.", response_format="wav"
    )
    assert answer.headers["x-model"] == "custom_voice" and frames_of(answer.content) > 0
    with server.client(timeout=300) as http:
        made = http.post("/v1/audio/voices", data={"name": "storyteller", "type": "prompt", "prompt": "A warm voice."})
        designed = made.json()["id"]
        for path in ("/v1/audio/speech/stream", "/v1/audio/speech/stream/pcm"):
            for voice, model in (("vivian", "custom_voice"), (designed, "voice_design")):
                earlier = http.post(path, json={"input": "The earlier routes.", "voice": voice})
                assert earlier.status_code == 200 and earlier.headers["x-model"] == model, earlier.text

    async def utterances() -> list[dict]:
        events = []
        async with connect(server.base.replace("http://", "ws://") + "/v1/audio/speech/ws") as ws:
            for voice in ("ryan", designed):  # one session, a voice (and so a model) per utterance
                await ws.send(json.dumps({"type": "session.update", "voice": voice}))
                await ws.send(json.dumps({"type": "input_text", "text": "One utterance."}))
                while True:
                    message = await asyncio.wait_for(ws.recv(), 300)
                    if isinstance(message, str):
                        events.append(json.loads(message))
                        if events[-1]["type"] in ("done", "error"):
                            break
        return events

    def steps(model: str) -> float:
        scraped = server_metrics(server)
        return scraped.get(("qwen3_tts_engine_step_seconds_count", frozenset({("model", model)})), 0.0)

    before = {model: steps(model) for model in ("custom_voice", "voice_design", "base")}
    events = asyncio.run(utterances())
    assert [event["type"] for event in events if event["type"] in ("done", "error")] == ["done", "done"], events
    after = {model: steps(model) for model in before}
    assert after["custom_voice"] > before["custom_voice"] and after["voice_design"] > before["voice_design"]
    assert after["base"] == before["base"]

    async def describe() -> Info:
        async with AsyncTcpClient("127.0.0.1", server.wyoming_port) as wyoming:
            await wyoming.write_event(Describe().event())
            while True:
                event = await asyncio.wait_for(wyoming.read_event(), 60)
                if Info.is_type(event.type):
                    return Info.from_event(event)

    voices = {voice.name: voice for voice in asyncio.run(describe()).tts[0].voices}
    assert voices["vivian"].installed and voices[designed].installed and voices["alloy"].installed


def test_the_gateway_takes_the_model_list_unchanged(checkpoints, tmp_path):
    """GATEWAY_MODE: the worker it starts on demand hosts every model the flags name, and routes as `serve` does."""
    extra = ("--model", str(checkpoints["base"]))
    gateway = live_process("serve", checkpoints["custom_voice"], *extra, env={**ENV, "GATEWAY_MODE": "true"})
    with gateway as live, live.client(timeout=300) as http:
        spoken = http.post("/v1/audio/speech", json={"input": "Through the gateway.", "voice": "vivian"})
        assert spoken.status_code == 200 and spoken.headers["x-model"] == "custom_voice", spoken.text
        reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()
        cloned = http.post("/v1/audio/speech/clone", data={"input": "Hi."}, files={"file": ("r.wav", reference)})
        assert cloned.status_code == 200 and cloned.headers["x-model"] == "base", cloned.text
        listed = [entry["id"] for entry in http.get("/v1/models").json()["data"]]
        assert listed[:2] == ["custom_voice", "base"]


def server_metrics(live) -> dict:
    with live.client(timeout=30) as http:
        text = http.get("/metrics").text
    scraped = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            scraped[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return scraped


def test_concurrent_streams_on_two_models_give_the_audio_they_give_alone(server, tmp_path):
    reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()
    preset = {"input": "Two models at once.", "voice": "ryan", "response_format": "wav", "seed": 5}
    clone_form = {"input": "Two models at once.", "seed": "5"}

    async def both(http: httpx.AsyncClient) -> list[bytes]:
        answers = await asyncio.gather(
            http.post("/v1/audio/speech", json=preset),
            http.post("/v1/audio/speech/clone", data=clone_form, files={"file": ("r.wav", reference)}),
        )
        assert all(answer.status_code == 200 for answer in answers)
        return [answer.content for answer in answers]

    async def scenario():
        async with httpx.AsyncClient(base_url=server.base, timeout=300) as http:
            alone = [
                (await http.post("/v1/audio/speech", json=preset)).content,
                (
                    await http.post("/v1/audio/speech/clone", data=clone_form, files={"file": ("r.wav", reference)})
                ).content,
            ]
            return alone, await both(http)

    alone, together = asyncio.run(scenario())
    assert together == alone


def test_an_idle_model_unloads_alone_and_a_one_model_budget_alternates_them(checkpoints, tmp_path):
    """IDLE_TIMEOUT unloads each model on its own (its engine thread ends with it), and a budget that holds one
    model at a time unloads the idle one for the other: every request answered, concurrent ones too."""
    costs = [
        checkpoint_footprint(path, prepare_loading(path), torch.float32).cost()
        for path in (checkpoints["custom_voice"], checkpoints["base"])
    ]
    env = {**ENV, "IDLE_TIMEOUT": "3", "MODEL_MEMORY_BUDGET": str(max(costs) + (1 << 20))}
    reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()
    preset = {"input": "One at a time.", "voice": "ryan", "response_format": "wav", "seed": 2}
    clone = {"input": "One at a time.", "seed": "2"}
    with live_process("serve", checkpoints["custom_voice"], "--model", str(checkpoints["base"]), env=env) as live:
        with live.client(timeout=300) as http:
            first = http.post("/v1/audio/speech", json=preset)
            assert first.status_code == 200, first.text
            assert states(live) == {"custom_voice": "ready", "base": "unloaded"}
            for _ in range(2):
                cloned = http.post("/v1/audio/speech/clone", data=clone, files={"file": ("r.wav", reference)})
                assert cloned.status_code == 200, cloned.text
                assert states(live) == {"custom_voice": "unloaded", "base": "ready"}
                again = http.post("/v1/audio/speech", json=preset)
                assert again.status_code == 200 and again.content == first.content
                assert states(live) == {"custom_voice": "ready", "base": "unloaded"}

        async def together() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=live.base, timeout=300) as http:
                files = {"file": ("r.wav", reference)}
                return await asyncio.gather(
                    http.post("/v1/audio/speech", json=preset),
                    http.post("/v1/audio/speech/clone", data=clone, files=files),
                )

        assert [answer.status_code for answer in asyncio.run(together())] == [200, 200]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(state != "unloaded" for state in states(live).values()):
            time.sleep(0.5)
        report = live.health()["models"]
        assert {model_id: (r["state"], r["engine_thread"]) for model_id, r in report.items()} == {
            "custom_voice": ("unloaded", False),
            "base": ("unloaded", False),
        }


# -- routing, decided in one function --------------------------------------------------------------------------------


def hosted(directory: Path, own: int) -> HostedModel:
    manager = ModelManager(lambda: None, describe=partial(prepare_loading, directory))
    manager.prepare()
    entry = HostedModel(directory.name, str(directory), manager, directory, torch.float32)
    entry.fingerprint, entry.footprint = directory.name, Footprint(own, "codec", {"decoder": 10})
    return entry


def test_openai_model_names_pick_the_smallest_or_largest_that_speaks_the_voice(tmp_path):
    small = hosted(make_test_model(tmp_path / "cv-small", "tiny", "custom_voice"), own=100)
    large = hosted(make_test_model(tmp_path / "cv-large", "tiny", "custom_voice", seed=3), own=900)
    base = hosted(make_test_model(tmp_path / "base", "tiny", "base"), own=50)
    registry = ModelRegistry([large, base, small])
    library = VoiceLibrary(tmp_path / "library", PromptCache(2))
    assert route(registry, library, "tts-1", "vivian") is small
    assert route(registry, library, "tts-1-hd", "alloy") is large
    assert route(registry, library, None, "vivian") is large  # unspecified: the first in MODELS that speaks it
    assert route(registry, library, "qwen3-tts", "vivian") is large  # a name hosting nothing: unspecified
    assert route(registry, library, "base", "vivian") is base  # a hosted id: that model, which answers for itself
    assert route(registry, library, "tts-1", "x", inline_clone=True) is base
    with pytest.raises(UnknownVoiceError):
        route(registry, library, None, "nobody")
    with pytest.raises(InvalidInputError, match="voices described in words"):
        route(registry, library, None, "nobody", instructions="A deep voice.")


def test_openai_transcription_names_pick_the_smallest_or_largest_transcriber():
    def recognizer(model_id: str, own: int) -> HostedModel:
        entry = HostedModel(model_id, model_id, ModelManager(lambda: None, warmup=None))
        entry.footprint = Footprint(own, "asr", {})
        return entry

    large, small = recognizer("asr-large", 900), recognizer("asr-small", 100)
    registry = ModelRegistry([], recognizers=[small, large])
    assert route_recognizer(registry, "gpt-4o-mini-transcribe") is small
    assert [route_recognizer(registry, name) for name in ("whisper-1", "gpt-4o-transcribe", "gpt-transcribe")] == [
        large
    ] * 3
    assert route_recognizer(registry, "ASR-large") is large and route_recognizer(registry, "other") is small


def test_a_model_loads_on_one_torch_thread_at_low_priority_while_another_is_loaded(tmp_path):
    """A second model's load must neither start an OpenMP pool beside a serving engine's (`placement.py`) nor take
    its CPU; the first takes every core at the process's priority."""
    import os
    import threading

    shares: dict[str, tuple[int, int]] = {}

    def manager(model_id: str) -> ModelManager:
        def load():  # on the loading thread
            niceness = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            shares[model_id] = (torch.get_num_threads(), niceness)
            return SimpleNamespace(config=None)

        return ModelManager(load, warmup=None, others_loaded=lambda: registry.others_loaded(model_id))

    registry = ModelRegistry([HostedModel(model_id, model_id, manager(model_id)) for model_id in ("a", "b")])
    registry.get("a").manager.get()
    registry.get("b").manager.get()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert shares == {"a": (len(os.sched_getaffinity(0)), ours), "b": (1, BESIDE_OTHERS_NICENESS)}


def test_two_models_waiting_for_room_at_once_do_not_wait_for_each_other():
    """Under a budget for one model, two loads that ask for room at the same moment: a model waiting for room takes
    none of it, so one of them gets the room at once (the other waits for it to be idle). Before, each counted the
    other as loaded and both waited until MODEL_MEMORY_BUDGET's wait ran out, their requests unanswered."""
    import threading

    def waiting_load(model_id: str) -> HostedModel:
        entry = HostedModel(model_id, model_id, ModelManager(lambda: None, warmup=None))
        entry.footprint = Footprint(100, "codec", {"decoder": 10})
        entry.manager.state = ModelState.LOADING  # its load has begun and asks for room
        return entry

    registry = ModelRegistry([waiting_load("a"), waiting_load("b")], budget=150, wait_seconds=3.0)
    outcomes: dict[str, tuple[str, float]] = {}
    both_asking = threading.Barrier(2)

    def ask(model_id: str) -> None:
        both_asking.wait()
        started = time.monotonic()
        try:
            registry.make_room(model_id)
            outcomes[model_id] = ("room", time.monotonic() - started)
        except ModelWaitError:
            outcomes[model_id] = ("no room", time.monotonic() - started)

    threads = [threading.Thread(target=ask, args=(model_id,)) for model_id in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (first, first_took), (second, second_took) = sorted(outcomes.values())
    assert (first, second) == ("no room", "room")  # the one given room is still loading: never idle here
    assert second_took < 1.0 <= first_took


# -- bad settings, refused at start ----------------------------------------------------------------------------------


def registry_of(*sources: Path | str, **settings) -> ModelRegistry:
    config = Settings.load(models=",".join(map(str, sources)), device="cpu", **settings)
    return build_registry(config, "cpu", "float32", False)


def test_bad_model_lists_are_refused_at_start_naming_the_checkpoint(checkpoints, tmp_path, caplog):
    cv = checkpoints["custom_voice"]
    with pytest.raises(CheckpointError, match="nowhere"):
        registry_of(cv, tmp_path / "nowhere")
    stranger = tmp_path / "stranger"
    shutil.copytree(cv, stranger)
    (stranger / "config.json").write_text('{"model_type": "whisper"}')
    with pytest.raises(ConfigurationError, match="stranger"):
        registry_of(cv, stranger).prepare()
    with caplog.at_level(logging.WARNING):
        twice = registry_of(cv, str(cv) + "/", checkpoints["base"])
    assert [hosted.id for hosted in twice] == ["custom_voice", "base"] and "twice" in caplog.text
    namesake = tmp_path / "elsewhere" / "custom_voice"
    shutil.copytree(cv, namesake)
    assert [hosted.id for hosted in registry_of(cv, namesake)] == ["custom_voice", "custom_voice-2"]
    with pytest.raises(ConfigurationError, match="holds no model"):
        registry_of(cv, checkpoints["base"], model_memory_budget="1M").prepare()
    small = registry_of(cv, checkpoints["base"], model_memory_budget="60M")
    small.prepare()
    with pytest.raises(ConfigurationError, match="PRELOAD_MODEL"):
        small.check_preload(list(small))
