"""The earlier server's clients, unchanged (issue 27): raw HTTP as they send it, checked as they check it. Its
behaviour is its code's (jaaacki/qwen3-tts server.py, v0.8.1 and v0.10.5), not its changelog's: /health's flat
keys and /v1/info, the clone route's `file`, a request without `model` (voice vivian, WAV), voice names matched
lower-cased with spaces as underscores and its six OpenAI aliases, the named voices on a Base model, one request
one byte string, its flat error keys, and its later settings."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import wave

import numpy as np
import pytest
import soundfile as sf

from in_process import make_app, run_in_app
from parity_cases import write_reference
from qwen3_tts_server.engine.model_manager import ModelManager
from qwen3_tts_server.service.speech.preset_voices import make_preset_voices
from qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary
from qwen3_tts_server.service.speech.voice_names import OPENAI_VOICES

TEXT = "Hello from the earlier server's clients."
SEEDED = {"input": TEXT, "seed": 3, "language": "English"}
EARLIER_ALIASES = {"alloy": "ryan", "echo": "aiden", "fable": "dylan", "onyx": "uncle_fu", "nova": "vivian"}
EARLIER_ALIASES["shimmer"] = "serena"
SHORT = 6  # frames a request may make (MAX_REQUEST_FRAMES): what each test compares needs no more
PRESETS = ["vivian", "serena", "uncle_fu", "dylan", "eric", "ryan", "aiden", "ono_anna", "sohee"]


def short_app(model, data_dir, **settings):
    return make_app(model, data_dir=data_dir, **{"max_request_frames": SHORT, **settings})


def post_all(app, bodies: list[dict], path: str = "/v1/audio/speech"):
    async def scenario(_, http):
        return [await http.post(path, json=body) for body in bodies]

    return run_in_app(app, scenario)


def wav_seconds(data: bytes) -> float:
    """What a reader that trusts the header (Python's `wave`, the earlier clients' duration checks) reads."""
    with wave.open(io.BytesIO(data)) as reader:
        return reader.getnframes() / reader.getframerate()


# -- /health and /v1/info ---------------------------------------------------------------------------------------


def test_health_carries_the_earlier_keys_flat_with_their_types(models, tmp_path):
    async def scenario(_, http):
        before = (await http.get("/health")).json()
        info_before = (await http.get("/v1/info")).json()
        await http.post("/v1/audio/speech", json={"input": "Hi."})
        return before, info_before, (await http.get("/health")).json(), (await http.get("/v1/info")).json()

    model = models["custom_voice"]
    manager = ModelManager(lambda: model, warmup=None, describe=lambda: model.config)
    before, info_before, after, info = run_in_app(make_app(manager, data_dir=tmp_path, audio_cache_max=8), scenario)
    assert (before["status"], before["model_loaded"], before["model_id"]) == ("ok", False, None)
    assert (after["model_loaded"], after["model_id"]) == (True, "tiny")
    types = {
        "cuda": bool,
        "queue_depth": int,
        "max_queue_depth": int,
        "audio_cache_size": int,
        "audio_cache_max": int,
        "voice_cache_size": int,
        "voice_cache_max": int,
        "voice_cache_hits": int,
    }
    for key, kind in types.items():
        assert type(after[key]) is kind, (key, after[key])
    assert (after["audio_cache_size"], after["audio_cache_max"], after["max_queue_depth"]) == (1, 8, 64)
    assert set(after["voices"][: len(PRESETS)]) == set(PRESETS), "the presets first, then the aliases"
    assert set(after["voices"]) == set(PRESETS) | set(OPENAI_VOICES)
    assert "gpu_name" not in after or after["cuda"]
    assert isinstance(after["voice_library"], dict), "ours, renamed beside its `voices`"
    assert info_before == {"stream_type": "token", "voices": after["voices"], "model_id": None}
    assert info["model_id"] == "tiny"


# -- the request's defaults, voice names and aliases ---------------------------------------------------------------


def test_a_request_without_model_is_the_earlier_form_vivian_in_a_whole_wav(models, tmp_path):
    earlier, explicit, openai_form, no_voice = post_all(
        short_app(models["custom_voice"], tmp_path),
        [
            SEEDED,
            {**SEEDED, "model": "tts-1", "voice": "vivian", "response_format": "wav", "stream": False},
            {**SEEDED, "model": "tts-1", "voice": "vivian"},
            {**SEEDED, "model": "tts-1"},
        ],
    )
    assert earlier.status_code == explicit.status_code == 200
    assert earlier.headers["content-type"] == "audio/wav" and "content-length" in earlier.headers
    assert earlier.content == explicit.content
    assert wav_seconds(earlier.content) == pytest.approx(sf.info(io.BytesIO(earlier.content)).duration, abs=1e-3)
    assert openai_form.headers["content-type"] == "audio/mpeg", "with `model`, OpenAI's default: mp3"
    assert no_voice.status_code == 200 and no_voice.content == openai_form.content, "no voice: DEFAULT_VOICE"


def test_voice_names_match_as_before_and_the_aliases_are_its_speakers(models, tmp_path):
    names = ["Uncle Fu", "UNCLE_FU", *EARLIER_ALIASES, *EARLIER_ALIASES.values()]
    bodies = [{**SEEDED, "voice": name, "response_format": "pcm"} for name in names]
    answers = dict(
        zip(
            names,
            post_all(short_app(models["custom_voice"], tmp_path), bodies),
            strict=True,
        )
    )
    assert all(answer.status_code == 200 for answer in answers.values())
    assert answers["Uncle Fu"].content == answers["UNCLE_FU"].content == answers["uncle_fu"].content
    for alias, speaker in EARLIER_ALIASES.items():
        assert answers[alias].content == answers[speaker].content, alias
    assert answers["alloy"].content != answers["vivian"].content


# -- one request, one byte string ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "sizes_known"),
    [({}, True), ({"stream": True}, False), ({"model": "tts-1", "response_format": "flac", "stream": True}, None)],
    ids=["wav", "wav-streamed", "flac-streamed"],
)
def test_a_repeated_request_is_the_same_bytes(models, tmp_path, options, sizes_known):
    first, replay = post_all(
        make_app(models["custom_voice"], data_dir=tmp_path, audio_cache_max=8), [{**SEEDED, **options}] * 2
    )
    assert (first.headers["x-cache"], replay.headers["x-cache"]) == ("miss", "hit")
    assert replay.content == first.content
    if sizes_known is not None:
        header_size = int.from_bytes(first.content[4:8], "little")
        assert (header_size == len(first.content) - 8) is sizes_known and (header_size == 0xFFFFFFFF) is not sizes_known


# -- the clone route -------------------------------------------------------------------------------------------------


def test_the_clone_route_takes_the_earlier_field_file_and_answers_a_whole_wav(models, tmp_path):
    reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()

    async def scenario(_, http):
        form = {"input": "Cloned.", "seed": "1"}
        as_file = await http.post("/v1/audio/speech/clone", data=form, files={"file": ("r.wav", reference)})
        as_ref = await http.post("/v1/audio/speech/clone", data=form, files={"ref_audio": ("r.wav", reference)})
        both = await http.post(
            "/v1/audio/speech/clone", data=form, files={"file": ("r.wav", reference), "ref_audio": ("r.wav", reference)}
        )
        neither = await http.post("/v1/audio/speech/clone", data=form)
        not_audio = await http.post("/v1/audio/speech/clone", data=form, files={"file": ("r.wav", b"not audio")})
        return as_file, as_ref, both, neither, not_audio

    as_file, as_ref, both, neither, not_audio = run_in_app(short_app(models["base"], tmp_path), scenario)
    assert as_file.status_code == 200 and as_file.headers["content-type"] == "audio/wav"
    assert wav_seconds(as_file.content) > 0 and as_file.content == as_ref.content
    assert (both.status_code, both.json()["error"]["param"]) == (400, "file")
    assert (neither.status_code, neither.json()["error"]["param"]) == (400, "ref_audio")
    assert (not_audio.json()["code"], not_audio.json()["error"]["param"], not_audio.status_code) == (
        "INVALID_AUDIO",
        "file",
        400,
    )


# -- error bodies ----------------------------------------------------------------------------------------------------


def test_errors_carry_the_earlier_flat_keys_beside_openai_s(models, tmp_path):
    async def scenario(_, http):
        unknown = await http.post("/v1/audio/speech", json={"input": "Hi.", "voice": "zed"})
        empty = await http.post("/v1/audio/speech", json={"input": "  "})
        nothing = await http.post("/v1/audio/speech", json={"input": "?!"})
        bad_mode = await http.post("/v1/audio/speech", json={"input": "Hi.", "stream_mode": "word"})
        missing = await http.get("/v1/nothing-here")
        return unknown, empty, nothing, bad_mode, missing

    answers = run_in_app(short_app(models["custom_voice"], tmp_path), scenario)
    unknown, empty, nothing, bad_mode, missing = (answer.json() for answer in answers)
    assert unknown["code"] == "UNKNOWN_VOICE" and unknown["statusCode"] == 400 and unknown["message"]
    assert unknown["context"]["voice"] == "zed" and "vivian" in unknown["context"]["valid_voices"]
    assert unknown["error"]["message"] == unknown["message"] and unknown["error"]["param"] == "voice"
    assert (empty["code"], empty["context"]) == ("EMPTY_INPUT", None)
    assert nothing["code"] == "NO_SENTENCES"
    assert (bad_mode["code"], bad_mode["error"]["param"]) == ("INVALID_VALUE", "stream_mode")
    assert (missing["code"], missing["statusCode"]) == ("NOT_FOUND", 404)


# -- the later settings ----------------------------------------------------------------------------------------------


def sse_deltas(body: bytes) -> list[bytes]:
    events = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]
    return [base64.b64decode(event["audio"]) for event in events if event["type"] == "speech.audio.delta"]


def test_stream_settings_cut_the_audio_as_the_earlier_server_did(models, tmp_path, clean_env):
    clean_env.setenv("STREAM_EMIT_FRAMES", "3")
    clean_env.setenv("STREAM_FIRST_EMIT", "1")
    sse = {**SEEDED, "response_format": "pcm", "stream_format": "sse"}
    app = short_app(models["custom_voice"], tmp_path, max_request_frames=12)
    token, sentence = post_all(app, [sse, {**sse, "stream_mode": "sentence"}])
    frame_bytes = 1920 * 2
    sizes = [len(delta) // frame_bytes for delta in sse_deltas(token.content)]
    assert sizes[:3] == [1, 3, 3] and all(size <= 3 for size in sizes[1:])
    assert len(sse_deltas(sentence.content)) == 1, "one chunk for the whole segment"
    whole, chunked = (np.frombuffer(b"".join(sse_deltas(r.content)), np.int16) for r in (sentence, token))
    assert len(whole) == len(chunked) and np.abs(whole.astype(int) - chunked).max() <= 2, "the same audio, rounded"


def test_the_later_variables_are_accepted(clean_env):
    """Honoured (STREAM_TYPE, STREAM_EMIT_FRAMES, STREAM_FIRST_EMIT, CUDA_GRAPHS) or warned once with what is done
    instead (TORCH_COMPILE_MODE), never an error."""
    env = {"STREAM_TYPE": "sentence", "TORCH_COMPILE_MODE": "max-autotune", "CUDA_GRAPHS": "false"}
    env |= {"STREAM_EMIT_FRAMES": "4", "STREAM_FIRST_EMIT": "0"}
    shown = subprocess.run(
        [sys.executable, "-m", "qwen3_tts_server.cli", "config", "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    values = json.loads(shown.stdout)
    assert (values["STREAM_TYPE"], values["CUDA_GRAPHS"], values["STREAM_FIRST_EMIT"]) == ("sentence", False, 0)
    assert shown.stderr.startswith("warning: TORCH_COMPILE_MODE is set but ignored: TORCH_COMPILE compiles")


# -- the named voices on a Base model --------------------------------------------------------------------------------


def test_make_preset_voices_gives_a_base_model_the_named_voices(checkpoint_dirs, models, tmp_path):
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "qwen3_tts_server.cli",
            "make-preset-voices",
            "--from",
            str(checkpoint_dirs["custom_voice"]),
            "--model",
            str(checkpoint_dirs["base"]),
            "--data-dir",
            str(tmp_path),
            "--max-frames",
            "24",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr
    assert "made 9 preset voices" in made.stderr
    library = VoiceLibrary(tmp_path, PromptCache(4))
    assert sorted(voice.name for voice in library.list()) == sorted(PRESETS)

    async def scenario(_, http):
        speech = {
            name: await http.post("/v1/audio/speech", json={**SEEDED, "voice": name, "response_format": "pcm"})
            for name in ["vivian", "Uncle Fu", "alloy", "ryan", "nova"]
        }
        default = await http.post("/v1/audio/speech", json={**SEEDED, "response_format": "pcm"})
        pcm = await http.post("/v1/audio/speech/stream/pcm", json={**SEEDED, "voice": "Vivian"})
        sse = await http.post("/v1/audio/speech/stream", json={**SEEDED, "voice": "shimmer"})  # base64 PCM, [DONE]
        reserved = await http.post(
            "/v1/audio/voices", data={"name": "Vivian"}, files={"audio_sample": ("r.wav", reference)}
        )
        narrator = await http.post(
            "/v1/audio/voices", data={"name": "Narrator"}, files={"audio_sample": ("r.wav", reference)}
        )
        again = await http.post(
            "/v1/audio/voices", data={"name": "narrator"}, files={"audio_sample": ("r.wav", reference)}
        )
        by_name = await http.post("/v1/audio/speech", json={**SEEDED, "voice": "narrator", "response_format": "pcm"})
        health = (await http.get("/health")).json()
        return speech, default, pcm, sse, reserved, narrator, again, by_name, health

    reference = write_reference(tmp_path, "ref_16k_mono.wav").read_bytes()
    speech, default, pcm, sse, reserved, narrator, again, by_name, health = run_in_app(
        short_app(models["base"], tmp_path), scenario
    )
    assert all(answer.status_code == 200 for answer in speech.values()), {k: v.text for k, v in speech.items()}
    assert speech["alloy"].content == speech["ryan"].content and speech["nova"].content == speech["vivian"].content
    assert default.content == speech["vivian"].content and pcm.content == speech["vivian"].content
    lines = [line for line in sse.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and b"".join(base64.b64decode(line[6:]) for line in lines[:-1])
    assert (reserved.status_code, reserved.json()["error"]["param"]) == (400, "name")
    assert narrator.status_code == 200 and again.status_code == 409
    assert by_name.status_code == 200
    assert set(PRESETS) | {"Narrator", *EARLIER_ALIASES} <= set(health["voices"])

    remade = make_preset_voices(models["custom_voice"], models["base"], library, max_frames=24)
    assert sorted(voice.name for voice in remade) == sorted(PRESETS)
    listed = {voice.id for voice in VoiceLibrary(tmp_path, PromptCache(4)).list()}
    assert listed == {voice.id for voice in remade} | {narrator.json()["id"]}, "each preset replaced, not added"


def test_stream_type_sentence_makes_a_chunk_per_segment_the_default(models, tmp_path, clean_env):
    clean_env.setenv("STREAM_TYPE", "sentence")
    sse = {**SEEDED, "response_format": "pcm", "stream_format": "sse"}

    async def scenario(_, http):
        info = (await http.get("/v1/info")).json()
        return (
            info,
            await http.post("/v1/audio/speech", json=sse),
            await http.post("/v1/audio/speech", json=sse | {"stream_mode": "token"}),
        )

    info, default, token = run_in_app(short_app(models["custom_voice"], tmp_path), scenario)
    assert info["stream_type"] == "sentence"
    assert len(sse_deltas(default.content)) == 1 < len(sse_deltas(token.content))
