"""The voice library and inline cloning through the API: upload, list, speak, restart, delete, and every
misuse answered with the OpenAI envelope."""

from __future__ import annotations

import os
import signal
import time

import httpx
import numpy as np
import openai
import pytest
import torch

from in_process import make_app, run_in_app
from parity_cases import REF_TEXT, write_reference
from qwen3_tts_server.api.schemas import MAX_UPLOAD_BYTES
from qwen3_tts_server.errors import NotFoundError
from qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary
from qwen3_tts_server.testing.live_server import live_server

REF = "ref_16k_mono.wav"
SPEECH = {"input": "Words in a cloned voice.", "response_format": "pcm", "seed": 5, "stream": False}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    return write_reference(tmp_path_factory.mktemp("ref"), REF).read_bytes()


def base_app(models, data_dir, **options):
    return make_app(models["base"], model_id="tiny-base", data_dir=data_dir, **options)


def test_upload_speak_restart_and_delete_with_the_sdk(models, reference, tmp_path):
    async def upload_and_speak(client: openai.AsyncOpenAI, http: httpx.AsyncClient):
        voice = await client.audio.voices.create(
            name="Narrator", audio_sample=("ref.wav", reference, "audio/wav"), consent="cons_123"
        )
        listed = (await http.get("/v1/audio/voices")).json()["data"]
        fetched = (await http.get(f"/v1/audio/voices/{voice.id}")).json()
        by_object = await http.post("/v1/audio/speech", json={**SPEECH, "voice": {"id": voice.id}})
        by_name = await client.audio.speech.create(
            model="tts-1", voice=voice.id, input=SPEECH["input"], response_format="pcm", extra_body={"seed": 5}
        )
        return voice, listed, fetched, by_object, by_name.content

    voice, listed, fetched, by_object, streamed = run_in_app(base_app(models, tmp_path), upload_and_speak)
    assert voice.object == "audio.voice" and voice.name == "Narrator" and voice.type == "audio_sample"
    assert voice.id.startswith("voice_") and abs(voice.created_at - time.time()) < 60
    assert fetched["id"] == voice.id and fetched["mode"] == "x_vector"  # no transcript: x-vector cloning
    assert [v["id"] for v in listed if v.get("object") == "audio.voice"] == [voice.id]
    assert by_object.status_code == 200 and by_object.content == streamed
    assert len(streamed) % (1920 * 2) == 0 and len(streamed) >= 2 * 1920 * 2

    async def after_restart(client, http):
        again = await http.post("/v1/audio/speech", json={**SPEECH, "voice": voice.id})
        deleted = await client.audio.voices.delete(voice.id)
        gone = await http.post("/v1/audio/speech", json={**SPEECH, "voice": voice.id})
        fetched = await http.get(f"/v1/audio/voices/{voice.id}")
        deleted_twice = await http.delete(f"/v1/audio/voices/{voice.id}")
        return again, deleted, gone, fetched, deleted_twice

    again, deleted, gone, fetched, deleted_twice = run_in_app(base_app(models, tmp_path), after_restart)
    assert again.status_code == 200 and again.content == streamed  # the persisted prompt speaks identically
    assert deleted.deleted and deleted.id == voice.id and deleted.object == "audio.voice.deleted"
    assert gone.status_code == 400 and "library voices" not in gone.json()["error"]["message"]
    assert fetched.status_code == 404 and deleted_twice.status_code == 404
    assert fetched.json()["error"]["param"] == "voice_id"
    assert not list((tmp_path / "voices").iterdir())


def test_inline_clone_matches_the_library_voice_and_reuses_its_prompt(models, reference, tmp_path):
    form = {"ref_text": REF_TEXT[REF], "input": SPEECH["input"], "response_format": "pcm", "seed": "5"}

    app = base_app(models, tmp_path)

    async def scenario(_, http):
        cache = app.state.services.voices.cloner.cache  # the prompt cache the library shares
        upload = await http.post(
            "/v1/audio/voices",
            data={"name": "ICL", "ref_text": REF_TEXT[REF], "mode": "in-context"},
            files={"audio_sample": ("ref.wav", reference, "audio/wav")},
        )
        library = await http.post("/v1/audio/speech", json={**SPEECH, "voice": upload.json()["id"]})
        hits = cache.hits
        inline = await http.post(
            "/v1/audio/speech/clone", data={**form, "stream": "false"}, files={"ref_audio": ("r.wav", reference)}
        )
        inline_hits = cache.hits - hits
        sse = await http.post(
            "/v1/audio/speech/clone", data={**form, "stream_format": "sse"}, files={"ref_audio": ("r.wav", reference)}
        )
        return upload, library, inline, inline_hits, sse

    upload, library, inline, inline_hits, sse = run_in_app(app, scenario)
    assert upload.status_code == 200 and upload.json()["mode"] == "in_context"
    assert inline.status_code == 200 and inline.content == library.content  # one prompt, by content hash
    assert inline_hits == 1, "the inline clone must reuse the uploaded voice's prompt"
    assert float(inline.headers["x-latency-total-ms"]) > 0
    assert sse.headers["content-type"].startswith("text/event-stream") and b"speech.audio.done" in sse.content


def test_designed_voice_speaks_its_description_on_voice_design(models, tmp_path):
    app = make_app(models["voice_design"], model_id="tiny-design", data_dir=tmp_path)
    description = "A calm, low voice."

    async def scenario(client, http):
        voice = await client.audio.voices.create(name="Calm", prompt=description, type="prompt")
        designed = await http.post("/v1/audio/speech", json={**SPEECH, "voice": voice.id})
        described = await http.post("/v1/audio/speech", json={**SPEECH, "voice": "any", "instructions": description})
        return voice, designed, described

    voice, designed, described = run_in_app(app, scenario)
    assert voice.type == "prompt" and voice.prompt == description
    assert designed.status_code == 200 and designed.content == described.content


def test_voice_errors_use_the_envelope(models, reference, tmp_path):
    custom = make_app(models["custom_voice"], model_id="tiny", data_dir=tmp_path)
    too_big = b"\0" * (MAX_UPLOAD_BYTES + 1)

    async def on_custom_voice(_, http):
        clone_on_custom = await http.post(
            "/v1/audio/voices", data={"name": "x"}, files={"audio_sample": ("r.wav", reference)}
        )
        designed = await http.post("/v1/audio/voices", data={"name": "d", "type": "prompt", "prompt": "Bright."})
        designed_on_custom = await http.post("/v1/audio/speech", json={**SPEECH, "voice": designed.json()["id"]})
        return clone_on_custom, designed_on_custom

    async def on_base(_, http):
        def upload(data=None, files=None):
            return http.post("/v1/audio/voices", data={"name": "v", **(data or {})}, files=files)

        return {
            "too_big": await upload(files={"audio_sample": ("r.wav", too_big)}),
            "not_audio": await upload(files={"audio_sample": ("r.txt", b"hello, this is text" * 50)}),
            "no_audio": await upload(),
            "bad_mode": await upload({"mode": "telepathy"}, {"audio_sample": ("r.wav", reference)}),
            "icl_without_text": await upload({"mode": "in_context"}, {"audio_sample": ("r.wav", reference)}),
            "no_name": await http.post("/v1/audio/voices", files={"audio_sample": ("r.wav", reference)}),
            "empty_prompt": await upload({"type": "prompt", "prompt": "  "}),
            "unknown_voice": await http.post("/v1/audio/speech", json={**SPEECH, "voice": "../../etc/passwd"}),
            "unknown_get": await http.get("/v1/audio/voices/voice_nope"),
            "traversal_get": await http.get("/v1/audio/voices/..%2F..%2Fetc"),
            "clone_without_audio": await http.post("/v1/audio/speech/clone", data={"input": "Hi."}),
            "clone_not_audio": await http.post(
                "/v1/audio/speech/clone", data={"input": "Hi."}, files={"ref_audio": ("r.bin", b"\x01\x02" * 999)}
            ),
            # A transcript joins the prompt of every request that speaks the voice: 1 MB cost 1 GB a request.
            "huge_ref_text": await upload({"ref_text": "word " * 200_000}, {"audio_sample": ("r.wav", reference)}),
            "long_ref_text": await upload({"ref_text": "a" * 4097}, {"audio_sample": ("r.wav", reference)}),
            "clone_huge_ref_text": await http.post(
                "/v1/audio/speech/clone",
                data={"input": "Hi.", "ref_text": "word " * 200_000},
                files={"ref_audio": ("r.wav", reference)},
            ),
        }

    clone_on_custom, designed_on_custom = run_in_app(custom, on_custom_voice)
    assert clone_on_custom.status_code == 400 and "Base checkpoint" in clone_on_custom.json()["error"]["message"]
    assert designed_on_custom.status_code == 400 and "VoiceDesign" in designed_on_custom.json()["error"]["message"]

    expected = {
        "too_big": (413, "audio_sample"),
        "not_audio": (400, "audio_sample"),
        "no_audio": (400, "audio_sample"),
        "bad_mode": (400, "mode"),
        "icl_without_text": (400, "ref_text"),
        "no_name": (400, "name"),
        "empty_prompt": (400, "prompt"),
        "unknown_voice": (400, "voice"),
        "unknown_get": (404, "voice_id"),
        "traversal_get": (404, None),
        "clone_without_audio": (400, "ref_audio"),
        "clone_not_audio": (400, "ref_audio"),
        "huge_ref_text": (400, "ref_text"),
        "long_ref_text": (400, "ref_text"),
        "clone_huge_ref_text": (400, "ref_text"),
    }
    for name, response in run_in_app(base_app(models, tmp_path / "base"), on_base).items():
        error = response.json()["error"]
        assert (response.status_code, error["param"]) == expected[name], (name, error)
        assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
        assert len(response.content) < 2000, (name, "no value is echoed whole")


def test_declared_oversize_upload_is_refused_before_it_is_read(models, tmp_path):
    async def scenario(_, http):
        request = http.build_request(
            "POST",
            "/v1/audio/voices",
            headers={"content-type": "multipart/form-data; boundary=x", "content-length": str(50 * 2**20)},
            content=b"--x--\r\n",
        )
        return await http.send(request)

    response = run_in_app(base_app(models, tmp_path), scenario)
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"


def test_library_survives_crashes_and_bounds_its_cache(models, reference, tmp_path):
    from qwen3_tts_server.audio.reference import load_reference

    base = models["base"]
    x_vector = base.voice_encoder.encode(load_reference(reference), x_vector_only=True)
    in_context = base.voice_encoder.encode(load_reference(reference), REF_TEXT[REF])
    library = VoiceLibrary(tmp_path, PromptCache(1))
    first, second = library.add("one", x_vector), library.add("two", in_context)
    (tmp_path / "voices" / ".incoming-voice_half_written").mkdir()  # a crash mid-upload
    (tmp_path / "voices" / ".deleted-voice_half_deleted").mkdir()  # a crash mid-delete

    reopened = VoiceLibrary(tmp_path, PromptCache(1))
    assert sorted(voice.id for voice in reopened.list()) == sorted([first.id, second.id])
    assert sorted(path.name for path in (tmp_path / "voices").iterdir()) == sorted([first.id, second.id])
    loaded = reopened.clone_prompt(reopened.get(second.id))
    assert loaded.id == in_context.id and torch.equal(loaded.ref_codes, in_context.ref_codes)
    reopened.clone_prompt(reopened.get(first.id))
    assert len(reopened.cache) == 1 and reopened.cache.get(in_context.id) is None  # least recently used left
    with pytest.raises(NotFoundError):
        reopened.get("voice_" + "0" * 32)


def test_voice_survives_kill_9_of_a_live_server(checkpoint_dirs, reference, tmp_path):
    env = {"DATA_DIR": str(tmp_path)}
    with live_server(checkpoint_dirs["base"], env=env) as url:
        upload = httpx.post(
            f"{url}/v1/audio/voices", data={"name": "kept"}, files={"audio_sample": ("r.wav", reference)}, timeout=60
        )
        first = httpx.post(f"{url}/v1/audio/speech", json={**SPEECH, "voice": upload.json()["id"]}, timeout=60)
        os.kill(httpx.get(f"{url}/health").json()["pid"], signal.SIGKILL)
    with live_server(checkpoint_dirs["base"], env=env) as url:
        again = httpx.post(f"{url}/v1/audio/speech", json={**SPEECH, "voice": upload.json()["id"]}, timeout=60)
        voices = httpx.get(f"{url}/v1/audio/voices").json()["data"]
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert [voice["name"] for voice in voices] == ["kept"]
    assert np.abs(np.frombuffer(first.content, np.int16)).max() > 0
