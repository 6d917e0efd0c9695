"""Faults a server survives, each through its real clients: Redis stopped, hung and restarted under the output
cache; the voice library's disk full or read-only; a checkpoint missing or corrupt at load, then fixed in place."""

from __future__ import annotations

import asyncio
import errno
import io
import os
import pathlib
import time

import pytest
import soundfile as sf

from in_process import make_app, run_in_app
from parity_cases import write_reference
from qwen3_tts_server.engine import model_manager
from qwen3_tts_server.engine.model_manager import ModelManager
from qwen3_tts_server.errors import CheckpointError, ModelUnavailableError
from qwen3_tts_server.model.tts.loading import prepare_loading
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary

SPEECH = {"model": "tts-1", "voice": "alloy", "input": "Faults happen.", "response_format": "wav", "stream": False}


def cached_app(models, tmp_path, redis_url: str):
    return make_app(
        models["custom_voice"],
        data_dir=tmp_path,
        redis_url=redis_url,
        audio_cache_max=16,
        max_request_frames=6,  # random weights never end speech by themselves
        max_batch_size=4,
    )


def assert_wav(response) -> None:
    audio, rate = sf.read(io.BytesIO(response.content))
    assert response.status_code == 200 and rate == 24000 and len(audio) > 0 and abs(audio).max() > 0


# -- 1. Redis under the output cache ---------------------------------------------------------------------------


def test_speech_goes_on_while_redis_is_down_and_the_cache_works_once_it_is_back(models, redis_server, tmp_path):
    app = cached_app(models, tmp_path, redis_server.url)

    async def scenario(_, http):
        async def speak(seed: int):
            return await http.post("/v1/audio/speech", json={**SPEECH, "seed": seed})

        up = [await speak(1), await speak(1)]
        redis_server.stop()
        down = [await speak(1) for _ in range(3)]
        redis_server.start()  # the same port, empty (no persistence)
        await asyncio.sleep(app.state.services.audio_cache.retry_after)
        back = [await speak(2), await speak(2)]
        redis_server.stop()  # and once more between two requests: the pooled connection is stale
        redis_server.start()
        again = [await speak(3), await speak(3)]
        return up, down, back, again

    up, down, back, again = run_in_app(app, scenario)
    for response in up + down + back + again:
        assert_wav(response)
    assert [r.headers["x-cache"] for r in up] == ["miss", "hit"]
    assert [r.headers["x-cache"] for r in down] == ["miss"] * 3
    assert all(r.content == up[0].content for r in down)  # seeded: generated again, the same audio
    assert [r.headers["x-cache"] for r in back] == ["miss", "hit"], "the cache must work again without a restart"
    assert [r.headers["x-cache"] for r in again] == ["miss", "hit"]


def test_a_hung_redis_costs_one_short_timeout_then_requests_skip_it_until_it_answers(models, redis_server, tmp_path):
    app = cached_app(models, tmp_path, redis_server.url)

    async def scenario(_, http):
        cache = app.state.services.audio_cache
        stored = await http.post("/v1/audio/speech", json={**SPEECH, "seed": 4})
        redis_server.pause()
        try:
            timings = []
            for _ in range(2):
                began = time.perf_counter()
                assert await cache.get("probe") is None
                timings.append(time.perf_counter() - began)
            during = [await http.post("/v1/audio/speech", json={**SPEECH, "seed": 4}) for _ in range(2)]
        finally:
            redis_server.resume()
        await asyncio.sleep(cache.retry_after)
        after = await http.post("/v1/audio/speech", json={**SPEECH, "seed": 4})
        return stored, timings, during, after

    stored, (first_probe, second_probe), during, after = run_in_app(app, scenario)
    assert first_probe < 1.0, f"a hung Redis held a lookup for {first_probe:.2f} s: the timeout must be short"
    assert second_probe < 0.05, "after a failure Redis is left alone for a while, not waited on by every request"
    for response in (stored, *during, after):
        assert_wav(response)
    assert [r.headers["x-cache"] for r in during] == ["miss", "miss"]
    assert after.headers["x-cache"] == "hit" and after.content == stored.content  # stored before the hang


# -- 2. The voice library's disk -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    return write_reference(tmp_path_factory.mktemp("ref"), "ref_16k_mono.wav").read_bytes()


def base_app(models, data_dir):
    return make_app(models["base"], model_id="tiny-base", data_dir=data_dir)


def refuse_under(monkeypatch, root: pathlib.Path, code: int, *methods: str) -> None:
    """Make `pathlib.Path.<method>` raise OSError(`code`) for every path under `root` (a disk that refuses)."""
    for method in methods:
        original = getattr(pathlib.Path, method)

        def refused(self, *args, _original=original, **kwargs):
            if self.is_relative_to(root):
                raise OSError(code, os.strerror(code), str(self))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, method, refused)


def library_voice_ids(listing) -> list[str]:
    return [voice["id"] for voice in listing.json()["data"] if voice.get("object") == "audio.voice"]


@pytest.mark.parametrize("failing_write", ["write_bytes", "write_text"], ids=["prompt_tensors", "metadata"])
def test_a_full_disk_refuses_an_upload_with_507_and_leaves_no_half_written_voice(
    models, reference, tmp_path, monkeypatch, failing_write
):
    root = tmp_path / "voices"

    async def scenario(_, http):
        def upload(name: str):
            return http.post("/v1/audio/voices", data={"name": name}, files={"audio_sample": ("r.wav", reference)})

        kept = (await upload("kept")).json()
        # The disk fills at the clone prompt's tensors, or after them at its metadata (a half-written voice).
        refuse_under(monkeypatch, root, errno.ENOSPC, failing_write)
        refused = await upload("refused")
        monkeypatch.undo()
        listed = await http.get("/v1/audio/voices")
        spoken = await http.post("/v1/audio/speech", json={**SPEECH, "voice": kept["id"], "seed": 1})
        return kept, refused, listed, spoken

    kept, refused, listed, spoken = run_in_app(base_app(models, tmp_path), scenario)
    assert refused.status_code == 507
    error = refused.json()["error"]
    assert error["code"] == "insufficient_storage" and "disk is full" in error["message"]
    assert library_voice_ids(listed) == [kept["id"]]
    assert [path.name for path in root.iterdir()] == [kept["id"]], "no partial files may stay behind"
    assert [voice.id for voice in VoiceLibrary(tmp_path, PromptCache(4)).list()] == [kept["id"]]
    assert_wav(spoken)


def test_a_read_only_library_refuses_uploads_and_deletes_with_507_and_keeps_its_voices(models, tmp_path, monkeypatch):
    root = tmp_path / "voices"

    async def scenario(_, http):
        def create(name: str):
            return http.post("/v1/audio/voices", data={"name": name, "type": "prompt", "prompt": "A calm voice."})

        kept = (await create("kept")).json()
        root.chmod(0o555)
        if os.access(root, os.W_OK):  # root ignores the mode bits: the file system refuses instead
            refuse_under(monkeypatch, root, errno.EROFS, "mkdir", "rename")
        try:
            refused = await create("refused")
            deleted = await http.delete(f"/v1/audio/voices/{kept['id']}")
            listed = await http.get("/v1/audio/voices")
        finally:
            monkeypatch.undo()
            root.chmod(0o755)
        return kept, refused, deleted, listed

    kept, refused, deleted, listed = run_in_app(base_app(models, tmp_path), scenario)
    for response, outcome in ((refused, "the voice was not stored"), (deleted, f"voice {kept['id']} was not deleted")):
        assert response.status_code == 507
        error = response.json()["error"]
        assert error["code"] == "insufficient_storage"
        assert error["message"] == f"the voice library is read-only: {outcome}"
    assert library_voice_ids(listed) == [kept["id"]]
    assert [path.name for path in root.iterdir()] == [kept["id"]]


# -- 3. A checkpoint missing or corrupt at load ----------------------------------------------------------------


def checkpoint_with_broken_weights(source: pathlib.Path, target: pathlib.Path, fault: str) -> pathlib.Path:
    """A copy of `source` (links) whose model.safetensors is missing or cut in half; returns that file's path."""
    target.mkdir()
    for entry in source.iterdir():
        (target / entry.name).symlink_to(entry)
    weights = target / "model.safetensors"
    weights.unlink()
    if fault == "truncated":
        whole = (source / "model.safetensors").read_bytes()
        weights.write_bytes(whole[: len(whole) // 2])
    return weights


@pytest.mark.parametrize("fault", ["missing", "truncated"])
def test_a_broken_checkpoint_is_a_503_with_its_reason_and_a_fixed_one_loads_without_a_restart(
    checkpoint_dirs, tmp_path, fault
):
    source = checkpoint_dirs["custom_voice"]
    directory = tmp_path / "checkpoint"
    weights = checkpoint_with_broken_weights(source, directory, fault)
    # As `serve` builds it: the real loader, the config read ahead, the warm-up.
    manager = ModelManager(lambda: Qwen3TTSModel.load(directory), describe=lambda: prepare_loading(directory))
    app = make_app(manager, max_request_frames=6)

    async def scenario(_, http):
        before = await http.get("/ready")
        began = time.perf_counter()
        refused = [
            await http.post("/v1/audio/speech", json={**SPEECH, "seed": 1}),
            await http.post("/v1/audio/speech", json={**SPEECH, "seed": 1, "stream": True}),
        ]
        refused_seconds = time.perf_counter() - began
        failed = await http.get("/ready")
        health = await http.get("/health")
        weights.unlink(missing_ok=True)
        weights.symlink_to(source / "model.safetensors")  # the operator restores the file
        await asyncio.sleep(manager.retry_in)
        # No request comes (a balancer took the replica out on its 503): the probe itself tries the load again.
        deadline = time.monotonic() + 30
        while (ready := await http.get("/ready")).status_code != 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        spoken = await http.post("/v1/audio/speech", json={**SPEECH, "seed": 1})
        return before, refused, refused_seconds, failed, health, spoken, ready

    before, refused, refused_seconds, failed, health, spoken, ready = run_in_app(app, scenario)
    # A missing file is found when the server reads the checkpoint ahead; a cut one only when it loads.
    assert before.status_code == (503 if fault == "missing" else 200)
    for response in refused:
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "model_unavailable" and "model.safetensors" in error["message"]
    assert refused_seconds < 5, "a checkpoint that cannot load must be answered at once"
    assert failed.status_code == 503
    body = failed.json()
    assert body["ready"] is False and "model.safetensors" in body["error"]
    assert "model.safetensors" in health.json()["model"]["error"]
    assert_wav(spoken)
    assert ready.status_code == 200 and ready.json() == {"ready": True, "model": "ready"}
    assert manager.loads == 1 and health.json()["model"]["loads"] == 0


def test_a_slow_failed_load_is_remembered_for_as_long_as_it_took(checkpoint_dirs, monkeypatch):
    monkeypatch.setattr(model_manager, "QUICK_FAILURE", 0.1)
    attempts = []

    def load() -> Qwen3TTSModel:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            time.sleep(0.3)  # a big checkpoint read for a while before its end turned out to be missing
            raise CheckpointError("cannot read weights from model.safetensors: incomplete file")
        return Qwen3TTSModel.load(checkpoint_dirs["custom_voice"])

    manager = ModelManager(load, warmup=None)
    with pytest.raises(ModelUnavailableError, match="incomplete file") as first:
        manager.get()
    began = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match=r"incomplete file \(the next attempt in 0\.\d s\)") as second:
        manager.get()
    assert time.perf_counter() - began < 0.05 and len(attempts) == 1, "a remembered failure is answered at once"
    assert 0.2 < manager.retry_in < 0.5
    time.sleep(manager.retry_in)
    assert manager.get() is manager.loaded and len(attempts) == 2 and manager.last_error is None
    assert first.value.status == second.value.status == 503
