"""Clients written for the earlier server work unchanged (its CHANGELOG and roadmap in the seed documents):
`instruct`, `ogg`, an unknown voice answered 400 with the valid voices, /cache/clear's keys, MAX_NEW_TOKENS, and
sampled requests cached as it cached them. The SSE and WebSocket forms are in test_api.py and test_websocket.py."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from in_process import make_app, run_in_app
from parity_cases import REF_TEXT, write_reference

SPEECH = {"model": "tts-1", "voice": "vivian", "input": "Hello from before.", "stream": False, "seed": 3}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    return write_reference(tmp_path_factory.mktemp("ref"), "ref_16k_mono.wav").read_bytes()


def post_all(app, bodies: list[dict]):
    async def scenario(_, http):
        return [await http.post("/v1/audio/speech", json=body) for body in bodies]

    return run_in_app(app, scenario)


def test_instruct_is_an_alias_of_instructions(models, tmp_path):
    plain, aliased, named = post_all(
        make_app(models["custom_voice"], data_dir=tmp_path),
        [
            {**SPEECH, "response_format": "pcm"},
            {**SPEECH, "response_format": "pcm", "instruct": "Speak slowly and warmly."},
            {**SPEECH, "response_format": "pcm", "instructions": "Speak slowly and warmly."},
        ],
    )
    assert plain.status_code == aliased.status_code == named.status_code == 200
    assert aliased.content == named.content and aliased.content != plain.content


def test_ogg_is_ogg_opus(models, tmp_path):
    (response,) = post_all(make_app(models["custom_voice"], data_dir=tmp_path), [{**SPEECH, "response_format": "ogg"}])
    assert response.status_code == 200 and response.headers["content-type"] == "audio/ogg"
    with av.open(io.BytesIO(response.content)) as container:
        stream = container.streams.audio[0]
        assert container.format.name == "ogg" and stream.codec_context.name == "opus"
        samples = np.concatenate([frame.to_ndarray().reshape(-1) for frame in container.decode(stream)])
    assert len(samples) >= 1920 and np.abs(samples).max() > 0


@pytest.mark.parametrize("model_name", ["custom_voice", "base"])
def test_an_unknown_voice_is_a_400_naming_the_valid_ones(models, tmp_path, model_name):
    (response,) = post_all(make_app(models[model_name], data_dir=tmp_path), [{**SPEECH, "voice": "nobody"}])
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "voice" and "unknown voice 'nobody'" in error["message"]
    if model_name == "custom_voice":
        assert "available: aiden, alloy, ash" in error["message"] and "vivian" in error["message"]
    else:
        assert "POST /v1/audio/voices" in error["message"]


def test_cache_clear_answers_with_the_earlier_keys_and_empties_every_cache(models, reference, tmp_path):
    app = make_app(models["base"], data_dir=tmp_path, audio_cache_max=8)
    form = {"input": "Again.", "ref_text": REF_TEXT["ref_16k_mono.wav"], "response_format": "pcm", "seed": "2"}

    async def scenario(_, http):
        async def clone():
            files = {"ref_audio": ("ref.wav", reference)}
            return await http.post("/v1/audio/speech/clone", data={**form, "stream": "false"}, files=files)

        first = await clone()
        cleared = (await http.post("/cache/clear")).json()
        again = await clone()
        return first, cleared, again, (await http.post("/cache/clear")).json()

    first, cleared, again, cleared_again = run_in_app(app, scenario)
    assert first.status_code == again.status_code == 200
    assert cleared["audio_cleared"] == 1 and cleared["voice_cleared"] == 1 and cleared["text_cleared"] >= 1
    # Nothing was left to hit: the clone prompt and the audio were made again, identical.
    assert again.headers["x-cache"] == "miss" and again.content == first.content
    assert cleared_again["audio_cleared"] == 1 and cleared_again["voice_cleared"] == 1


def test_max_new_tokens_caps_the_frames_of_a_request(models, tmp_path, monkeypatch):
    monkeypatch.setenv("MAX_NEW_TOKENS", "3")
    (response,) = post_all(make_app(models["custom_voice"], data_dir=tmp_path), [{**SPEECH, "response_format": "pcm"}])
    assert response.status_code == 200 and response.headers["x-segments-cut"] == "0"
    assert len(response.content) == 3 * 1920 * 2  # three 80 ms frames of 16-bit samples at 24 kHz


@pytest.mark.parametrize(("cache_sampled", "expected"), [(True, ["miss", "hit"]), (False, [None, None])])
def test_unseeded_requests_are_cached_unless_turned_off(models, tmp_path, cache_sampled, expected):
    app = make_app(models["custom_voice"], data_dir=tmp_path, audio_cache_max=8, audio_cache_sampled=cache_sampled)
    body = {**SPEECH, "seed": None, "response_format": "pcm", "temperature": 0.9}
    first, second = post_all(app, [body, body])
    assert [response.headers.get("x-cache") for response in (first, second)] == expected
    assert (first.content == second.content) is cache_sampled  # sampled anew, two unseeded takes differ
