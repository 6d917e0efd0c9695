"""The OpenAI-compatible API driven by the real `openai` SDK, in process."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os

import av
import openai
import pytest

from in_process import make_app, run_in_app
from qwen3_tts_server import __version__
from qwen3_tts_server.engine.jobs import SpeechJob
from qwen3_tts_server.model.tts.prompt import SpeechInput

FORMAT_RATES = {"wav": 24000, "mp3": 24000, "flac": 24000, "opus": 48000, "aac": 24000}


@pytest.fixture(scope="module")
def api(models, tmp_path_factory):
    """(run, client factory): `run(coro_fn)` runs coro_fn(openai_client, httpx_client) with the app up."""
    app = make_app(
        models["custom_voice"],
        model_id="tiny-custom-voice",
        data_dir=tmp_path_factory.mktemp("data"),
        max_batch_size=4,
    )

    return lambda scenario: run_in_app(app, scenario)


def decode(data: bytes) -> tuple[int, float]:
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(container.streams.audio[0]))
    rate = frames[0].sample_rate
    return rate, sum(f.samples for f in frames) / rate


def test_every_container_format_decodes_back(api):
    async def scenario(client, _):
        out = {}
        for fmt in FORMAT_RATES:
            response = await client.audio.speech.create(
                model="tts-1", voice="alloy", input="Hi there.", response_format=fmt, extra_body={"seed": 1}
            )
            out[fmt] = response.content
        return out

    for fmt, data in api(scenario).items():
        rate, seconds = decode(data)
        assert rate == FORMAT_RATES[fmt], fmt
        assert seconds >= 2 * 0.08 and abs(seconds / 0.08 - round(seconds / 0.08)) < 0.75, (fmt, seconds)


def test_pcm_is_raw_24khz_16bit_and_streams_through_the_sdk(api):
    async def scenario(client, _):
        whole = await client.audio.speech.create(
            model="tts-1", voice="Ryan", input="Streaming check.", response_format="pcm", extra_body={"seed": 3}
        )
        async with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="Ryan", input="Streaming check.", response_format="pcm", extra_body={"seed": 3}
        ) as streamed:
            parts = [part async for part in streamed.iter_bytes()]
            media_type = streamed.headers["content-type"]
        return whole.content, b"".join(parts), media_type

    whole, streamed, media_type = api(scenario)
    assert media_type == "audio/pcm" and whole == streamed
    assert len(whole) % (1920 * 2) == 0 and len(whole) >= 2 * 1920 * 2


def test_sse_events(api):
    async def scenario(_, http):
        body = {
            "model": "tts-1",
            "voice": "nova",
            "input": "Events please.",
            "response_format": "pcm",
            "stream_format": "sse",
            "seed": 2,
        }
        response = await http.post("/v1/audio/speech", json=body)
        return response.headers, response.text

    headers, text = api(scenario)
    assert headers["content-type"].startswith("text/event-stream") and headers["x-accel-buffering"] == "no"
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done" and {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    usage = events[-1]["usage"]
    assert len(audio) == usage["output_tokens"] * 1920 * 2
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] and usage["input_tokens"] > 0


def test_whole_file_has_content_length(api):
    async def scenario(_, http):
        body = {"voice": "coral", "input": "Whole file.", "response_format": "wav", "stream": False, "seed": 4}
        return await http.post("/v1/audio/speech", json=body)

    response = api(scenario)
    assert response.status_code == 200 and int(response.headers["content-length"]) == len(response.content)
    latency = {part: float(response.headers[f"x-latency-{part}-ms"]) for part in ("queue", "infer", "encode", "total")}
    assert latency["infer"] > 0 and latency["encode"] > 0 and latency["queue"] >= 0
    assert latency["total"] >= latency["queue"] + latency["infer"]
    assert 0 < float(response.headers["x-latency-first-audio-ms"]) <= latency["total"]
    assert decode(response.content)[0] == 24000


@pytest.mark.parametrize(
    ("body", "status", "param", "message"),
    [
        ({"voice": "zed", "input": "Hi."}, 400, "voice", "unknown voice 'zed'; available: aiden, alloy, ash"),
        ({"voice": "alloy", "input": "   "}, 400, "input", "input is empty"),
        ({"voice": "alloy", "input": "x" * 4097}, 400, "input", "at most 4096"),
        ({"voice": "alloy"}, 400, "input", "required"),
        ({"voice": "alloy", "input": "Hi.", "speed": 9}, 400, "speed", "less than or equal to 4"),
        ({"voice": "alloy", "input": "Hi.", "top_k": 2**85}, 400, "top_k", "less than or equal to 2147483647"),
        ({"voice": "alloy", "input": "Hi.", "response_format": "wma"}, 400, "response_format", "mp3"),
        ({"voice": "alloy", "input": "Hi.", "language": "Klingon"}, 400, "language", "unknown language"),
        (
            {"voice": "alloy", "input": "Hi.", "response_format": "opus", "sample_rate": 44100},
            400,
            "sample_rate",
            "opus cannot be sent at 44100 Hz",
        ),
    ],
)
def test_errors_use_the_openai_envelope(api, body, status, param, message):
    async def scenario(_, http):
        return await http.post("/v1/audio/speech", json={"model": "tts-1", **body})

    response = api(scenario)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and message in error["message"]


def test_framework_errors_have_a_code_and_long_values_are_not_echoed_whole(api):
    async def scenario(_, http):
        long_voice = {"model": "tts-1", "voice": "z" * 100_000, "input": "Hi."}
        return (
            await http.get("/v1/nothing-here"),
            await http.get("/v1/audio/speech"),
            await http.post("/v1/audio/speech", json=long_voice),
        )

    missing, wrong_method, long_voice = api(scenario)
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    assert (wrong_method.status_code, wrong_method.json()["error"]["code"]) == (405, "method_not_allowed")
    assert wrong_method.headers["allow"] == "POST"
    assert long_voice.status_code == 400 and len(long_voice.json()["error"]["message"]) < 1000, long_voice.text[:300]


def test_sdk_raises_typed_errors(api):
    async def scenario(client, _):
        with pytest.raises(openai.BadRequestError) as info:
            await client.audio.speech.create(model="tts-1", voice="zed", input="Hi.")
        return info.value.body

    assert "unknown voice" in api(scenario)["message"]


def test_discovery_and_health(api):
    async def scenario(client, http):
        models = await client.models.list()
        voices = (await http.get("/v1/audio/voices")).json()
        return [m.id for m in models.data], voices, (await http.get("/health")).json(), await http.get("/ready")

    model_ids, voices, health, ready = api(scenario)
    assert model_ids == ["tiny-custom-voice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"]
    names = {v["id"]: v for v in voices["data"]}
    assert "vivian" in names and names["alloy"]["alias_of"] == "ryan"
    assert health["model"]["state"] == "ready" and health["model"]["device"] == "cpu" and ready.status_code == 200
    assert health["model"]["type"] == "custom_voice" and health["model"]["dtype"] == "float32"
    assert health["memory"]["rss_bytes"] > 50 * 2**20 and health["queue_depth"] == health["active_streams"] == 0
    assert health["pid"] == os.getpid() and health["version"] == __version__


def test_open_webuis_voice_and_model_pickers_fill_from_the_server(api):
    """Open WebUI (its OpenAI TTS engine on a base URL not OpenAI's) fills its pickers as its audio router reads:
    `{base}/audio/voices` -> `voices`, each `{id, name}`; `{base}/audio/models` -> `models`, each `{id}`."""

    async def scenario(_, http):
        return (await http.get("/v1/audio/voices")).json(), (await http.get("/v1/audio/models")).json()

    voices, models = api(scenario)
    available = {voice["id"]: voice["name"] for voice in voices.get("voices", [])}
    assert available["vivian"] == "vivian" and available["alloy"] == "alloy"
    assert set(available) == {voice["id"] for voice in voices["data"]}
    assert [model["id"] for model in models.get("models", [])] == ["tiny-custom-voice", "tts-1", "tts-1-hd",
                                                                   "gpt-4o-mini-tts"]  # fmt: skip


def test_seed_compatible_stream_paths(api):
    async def scenario(_, http):
        body = {"voice": "Vivian", "input": "Old paths.", "seed": 6}
        sse = await http.post("/v1/audio/speech/stream", json=body)
        pcm = await http.post("/v1/audio/speech/stream/pcm", json=body)
        return sse, pcm

    sse, pcm = api(scenario)
    # As the earlier server sent it: each data line the base64 of raw 16-bit PCM, then [DONE].
    lines = [line[6:] for line in sse.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]" and len(lines) > 2
    audio = b"".join(base64.b64decode(line, validate=True) for line in lines[:-1])
    assert pcm.headers["x-pcm-sample-rate"] == "24000" and pcm.headers["x-pcm-bit-depth"] == "16"
    assert pcm.headers["x-pcm-channels"] == "1" and pcm.headers["content-type"] == "audio/pcm"
    assert audio == pcm.content and len(audio) % (1920 * 2) == 0


def test_api_key_guards_everything_but_the_probes(models, tmp_path):
    app = make_app(models["custom_voice"], model_id="tiny", api_key="s3cret", data_dir=tmp_path, max_batch_size=2)

    async def scenario(client, http):
        health = await http.get("/health")
        ready = await http.get("/ready")
        missing = await http.get("/v1/models")
        wrong = await http.get("/v1/models", headers={"Authorization": "Bearer nope"})
        good = await http.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        speech = await client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hi.", response_format="pcm", extra_body={"seed": 1}
        )
        return health, ready, missing, wrong, good, speech

    health, ready, missing, wrong, good, speech = run_in_app(app, scenario, api_key="s3cret")
    assert health.status_code == ready.status_code == good.status_code == 200 and len(speech.content) > 0
    for response in (missing, wrong):
        assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


def test_speed_changes_duration_not_pitch(api):
    async def scenario(client, _):
        out = {}
        for speed in (1.0, 2.0, 0.5):
            response = await client.audio.speech.create(
                model="tts-1",
                voice="Ryan",
                input="Speed test sentence.",
                response_format="pcm",
                speed=speed,
                extra_body={"seed": 8},
            )
            out[speed] = len(response.content) / 2 / 24000
        return out

    seconds = api(scenario)
    assert abs(seconds[2.0] - seconds[1.0] / 2) < 0.1 and abs(seconds[0.5] - seconds[1.0] * 2) < 0.15


def test_full_queue_answers_503_with_retry_after(models, tmp_path):
    model = models["custom_voice"]
    app = make_app(model, model_id="tiny", data_dir=tmp_path, max_batch_size=1, max_queue_depth=1)
    engine = app.state.services.registry.default.engine
    hold = SpeechInput("Hold the only row.", "English", "Vivian")
    job = SpeechJob(model.prompts.prepare(hold), model.sampling(seed=1), max_frames=2000, suppress_eos=True)

    async def scenario(_, http):
        running = engine.submit(job)
        await running.__anext__()  # it holds the only row
        queued = engine.submit(dataclasses.replace(job, continuation=True))  # never refused: the queue is now full
        plain = await http.post("/v1/audio/speech", json={"voice": "alloy", "input": "Hi."})
        sse = await http.post("/v1/audio/speech", json={"voice": "alloy", "input": "Hi.", "stream_format": "sse"})
        await running.aclose()
        await queued.aclose()
        return plain, sse

    for response in run_in_app(app, scenario):
        assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        assert response.json()["error"]["code"] == "server_busy"
