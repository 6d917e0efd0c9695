"""POST /v1/audio/transcriptions on a live server hosting a speech model and a Qwen3-ASR one (tiny random
weights), driven by the openai SDK and by raw multipart requests as other clients send them: every answer's text
is the one the transcriber gives offline for the same bytes; every bad request is an OpenAI error envelope."""

from __future__ import annotations

import asyncio
import io
import json
import math
import re

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from audio_files import encode_with_pyav
from qwen3_tts_server.api.recognition.transcriptions import _earlier_events
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber, heard_wave
from qwen3_tts_server.service.recognition.transcription import TextDelta, Transcript, TranscriptSegment, visible_text
from qwen3_tts_server.testing.live_server import live_process
from qwen3_tts_server.testing.signals import voiced_glide

ENV = {"MAX_REQUEST_FRAMES": "6", "TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0"}
SECONDS = 1.2


@pytest.fixture(scope="module")
def server(both_families):
    with live_process("serve", both_families["speech"], "--model", str(both_families["asr"]), env=ENV) as live:
        yield live


@pytest.fixture(scope="module")
def transcriber(both_families) -> Transcriber:
    return Transcriber(load_asr_checkpoint(both_families["asr"]))


@pytest.fixture(scope="module")
def clip() -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, voiced_glide(SECONDS, 22050, pitch=135.0), 22050, format="WAV")
    return buffer.getvalue()


def offline(transcriber: Transcriber, audio: bytes, language: str | None = None, context: str = ""):
    (result,) = transcriber.transcribe([heard_wave(audio, "clip")], [language], [context])
    return result


def sdk(server) -> openai.OpenAI:
    return openai.OpenAI(api_key="unused", base_url=server.base + "/v1", timeout=300)


def test_json_text_and_verbose_json_through_the_openai_sdk(server, transcriber, clip):
    expected = offline(transcriber, clip, "English", "Qwen")
    client = sdk(server)
    options = {"model": "whisper-1", "file": ("clip.wav", clip), "language": "en", "prompt": "Qwen"}
    as_json = client.audio.transcriptions.create(**options)
    as_text = client.audio.transcriptions.create(response_format="text", **options)
    verbose = client.audio.transcriptions.create(
        response_format="verbose_json", timestamp_granularities=["segment"], **options
    )
    assert as_json.text == expected.text and as_text == expected.text + "\n"
    assert as_json.usage.type == "duration" and as_json.usage.seconds == math.ceil(SECONDS)
    assert (verbose.text, verbose.language, verbose.duration) == (expected.text, "english", pytest.approx(SECONDS))
    (segment,) = verbose.segments
    assert (segment.id, segment.start, segment.end, segment.text) == (0, 0.0, pytest.approx(SECONDS), expected.text)
    assert segment.tokens == expected.part_tokens[0]


def test_streamed_deltas_add_up_to_the_transcript_that_done_gives_with_usage(server, transcriber, clip):
    expected = offline(transcriber, clip, "English")
    stream = sdk(server).audio.transcriptions.create(model="gpt-4o-transcribe", file=clip, language="en", stream=True)
    events = list(stream)
    *deltas, done = events
    assert deltas and all(event.type == "transcript.text.delta" for event in deltas)
    decoded = transcriber.model.tokenizer.decode(expected.part_tokens[0], skip_special=True)
    # The random model repeats itself, and the official reading collapses the repeats: the deltas show them once,
    # as the transcript has them.
    assert "".join(event.delta for event in deltas) == expected.text != visible_text(decoded, True)
    assert done.type == "transcript.text.done" and done.text == expected.text
    assert done.usage.seconds == math.ceil(SECONDS) and [language.code for language in done.languages] == ["en"]


def test_openais_newer_fields_through_the_sdk_and_raw_as_it_sends_them(server, transcriber, clip):
    """gpt-transcribe with one of `languages` (forced) and `keywords` (the model's context, after the prompt); the
    codes of the languages heard come back in `languages`, in json and in the done event, and verbose_json names
    the language json names. Raw, the form the SDK sends: `languages[]` and `keywords[]`, once a value."""
    expected = offline(transcriber, clip, "English", "Qwen\nAlibaba, Tongyi")
    assert expected.text != offline(transcriber, clip, "English", "Qwen").text  # the keywords change what is heard
    client = sdk(server)
    fields = {"model": "gpt-transcribe", "languages": ["en"], "prompt": "Qwen", "keywords": ["Alibaba", "Tongyi"]}
    answer = client.audio.transcriptions.create(file=("clip.wav", clip), **fields)
    *deltas, done = client.audio.transcriptions.create(file=("clip.wav", clip), stream=True, **fields)
    verbose = client.audio.transcriptions.create(file=("clip.wav", clip), response_format="verbose_json", **fields)
    assert answer.text == done.text == "".join(delta.delta for delta in deltas) == verbose.text == expected.text
    assert [language.code for language in answer.languages] == [language.code for language in done.languages] == ["en"]
    assert verbose.language == "english" and answer.model_extra["language"] == "English"
    raw = {"model": "gpt-transcribe", "languages[]": ["en"], "keywords[]": ["Alibaba", "Tongyi"], "prompt": "Qwen"}
    with server.client(timeout=300) as http:
        answer = http.post("/v1/audio/transcriptions", data=raw, files={"file": ("clip.wav", clip)})
        identified = http.post("/v1/audio/transcriptions", files={"file": ("clip.wav", clip)})
    assert (answer.json()["text"], answer.json()["languages"]) == (expected.text, [{"code": "en"}])
    assert identified.json()["languages"] == []  # the random model names no language


def test_a_webm_upload_without_a_content_type_is_read_by_its_bytes(server, transcriber):
    """As Open WebUI's microphone button sends it: webm/opus, named audio.webm, typed application/octet-stream."""
    webm = encode_with_pyav(voiced_glide(1.0, 48000, pitch=160.0)[:, None], 48000, "webm", "libopus")
    with server.client(timeout=300) as http:
        answer = http.post(
            "/v1/audio/transcriptions",
            data={"model": "whisper-1"},
            files={"file": ("audio.webm", webm, "application/octet-stream")},
        )
    assert answer.status_code == 200, answer.text
    expected = offline(transcriber, webm)
    assert answer.json()["text"] == expected.text
    # the random model never ends its text: its one part spends its budget, and the answer says so
    assert expected.truncated and answer.headers["X-Parts-Cut"] == "1"


@pytest.mark.parametrize(
    ("fields", "upload", "status", "param", "message"),
    [
        ({"response_format": "srt"}, "clip", 400, "response_format", "srt: word timestamps need a ForcedAligner"),
        (
            {"timestamp_granularities[]": "word", "response_format": "verbose_json"},
            "clip",
            400,
            "timestamp_granularities",
            "Qwen/Qwen3-ForcedAligner-0.6B",
        ),
        ({"response_format": "yaml"}, "clip", 400, "response_format", "response_format must be one of"),
        ({"temperature": "1.5"}, "clip", 400, "temperature", "temperature is between 0 and 1"),
        ({"include[]": "logprobs", "response_format": "text"}, "clip", 400, "include", "needs response_format json"),
        ({"include[]": "item.logprobs"}, "clip", 400, "include", "include takes logprobs, not 'item.logprobs'"),
        ({"return_timestamps": "true"}, "clip", 400, "return_timestamps", "word timestamps need a ForcedAligner"),
        ({"language": "klingon"}, "clip", 400, "language", "unsupported language 'klingon'"),
        ({}, "garbage", 400, "file", "is not audio"),
        ({"known_speaker_names[]": "agent"}, "clip", 400, "known_speaker_names", "speaker diarization is not"),
        ({"known_speaker_references[]": "data:audio/wav;base64,UklGRg=="}, "clip", 400, "known_speaker_references", ""),
        ({"response_format": "diarized_json"}, "clip", 400, "response_format", "Qwen3-ASR does not tell speakers"),
        ({}, "empty", 400, "file", "file is empty"),
        ({}, "huge", 413, "file", "larger than the 25 MiB limit"),
        ({}, None, 400, None, "file"),
    ],
)
def test_every_bad_request_is_an_openai_error(server, clip, fields, upload, status, param, message):
    uploads = {"clip": clip, "garbage": b"not audio at all" * 10, "empty": b"", "huge": b"\0" * (25 * 2**20 + 1)}
    files = {"file": ("upload.wav", uploads[upload])} if upload else None
    with server.client(timeout=300) as http:
        answer = http.post("/v1/audio/transcriptions", data={"model": "whisper-1", **fields}, files=files)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert message in error["message"] and (param is None or error["param"] == param)


def test_streamed_logprobs_come_with_their_deltas(server, transcriber, clip):
    with server.client(timeout=300) as http:
        answer = http.post(
            "/v1/audio/transcriptions",
            data={"model": "gpt-4o-transcribe", "stream": "true", "language": "en", "include[]": "logprobs"},
            files={"file": ("clip.wav", clip)},
        )
    assert answer.status_code == 200, answer.text
    *deltas, done = sse_data(answer.text)
    assert done["type"] == "transcript.text.done" and done["text"] == offline(transcriber, clip, "English").text
    assert [item for delta in deltas for item in delta["logprobs"]] == done["logprobs"] != []
    assert all(delta["logprobs"] for delta in deltas)  # each delta's text was made by some token


@pytest.mark.parametrize(
    ("path", "fields"), [("/v1/audio/subtitles", {"mode": "fast"}), ("/v1/audio/transcriptions/stream", {})]
)
def test_every_route_that_transcribes_takes_a_recording_of_up_to_25_mib(server, path, fields):
    """Past the 10 MiB of a voice sample (the body limit of other uploads), the recording itself is read."""
    with server.client(timeout=300) as http:
        answer = http.post(path, data=fields, files={"file": ("big.wav", b"not audio" * (12 * 2**20 // 9))})
    assert answer.status_code == 400 and "is not audio" in answer.json()["error"]["message"], answer.text


@pytest.mark.parametrize("path", ["/v1/audio/subtitles", "/v1/audio/transcriptions/stream"])
def test_the_earlier_servers_own_routes_answer_a_missing_file_with_its_422(server, path):
    """As its suite sends it (no `file`): FastAPI's 422 there, in the error envelope here (OpenAI's route answers
    400, above)."""
    with server.client(timeout=300) as http:
        answer = http.post(path, data={"mode": "accurate", "language": "auto"})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert (body["error"]["param"], body["error"]["code"], body["statusCode"]) == ("file", "invalid_value", 422)
    assert body["error"]["type"] == "invalid_request_error" and "file" in body["error"]["message"]


def test_the_size_and_duration_limits_are_settings(both_families, clip):
    env = {**ENV, "MAX_TRANSCRIPTION_BYTES": str(2 * 2**20), "MAX_TRANSCRIPTION_SECONDS": "1"}
    with (
        live_process("serve", both_families["speech"], "--model", str(both_families["asr"]), env=env) as live,
        live.client(timeout=300) as http,
    ):
        over = http.post("/v1/audio/transcriptions", files={"file": ("big.wav", b"\0" * (2 * 2**20 + 1))})
        body = http.post("/v1/audio/transcriptions", files={"file": ("big.wav", b"\0" * (3 * 2**20))})
        long = http.post("/v1/audio/subtitles", data={"mode": "fast"}, files={"file": ("clip.wav", clip)})
        # Deepgram's prerecorded route takes the recording as the body itself, within the same limit
        raw = {"content-type": "audio/wav"}
        raw_over = http.post("/v1/listen", content=b"\0" * (2 * 2**20 + 1), headers=raw)
        raw_within = http.post("/v1/listen", content=b"\0" * (2 * 2**20), headers=raw)
    assert over.status_code == 413 and over.json()["error"]["message"] == "file is larger than the 2 MiB limit"
    assert raw_over.status_code == 413 and "the request body is larger than" in raw_over.json()["error"]["message"]
    assert raw_within.status_code == 400 and raw_within.json()["error"]["param"] == "file"  # not audio, not too big
    assert body.status_code == 413 and "the request body is larger than" in body.json()["error"]["message"]
    assert long.status_code == 400, long.text
    error = long.json()["error"]
    assert error["param"] == "file" and error["code"] == "audio_too_long"
    assert "lasts more than 1 s; this server transcribes at most 1 s (MAX_TRANSCRIPTION_SECONDS)" in error["message"]


UPLOADS = {  # OpenAI's listed extensions (mpeg and mpga are MP3, mp4 and m4a AAC in MP4) and telephony WAV
    "flac": ("flac", "flac", 22050),
    "mp3": ("mp3", "libmp3lame", 44100),
    "mpeg": ("mp3", "libmp3lame", 22050),
    "mpga": ("mp3", "libmp3lame", 16000),
    "mp4": ("mp4", "aac", 44100),
    "m4a": ("mp4", "aac", 48000),
    "ogg": ("ogg", "libopus", 48000),
    "wav": ("wav", "pcm_s16le", 16000),
    "webm": ("webm", "libopus", 48000),
    "mulaw": ("wav", "pcm_mulaw", 8000),
    "alaw": ("wav", "pcm_alaw", 8000),
}


def test_every_format_openai_lists_and_telephony_wav_are_read_by_their_bytes(server, transcriber):
    """Each upload named `audio` with a generic content type, as clients that know neither send it: the text is
    the offline transcript of the same bytes."""
    heard = {}
    with server.client(timeout=300) as http:
        for name, (container, codec, rate) in UPLOADS.items():
            audio = encode_with_pyav(voiced_glide(0.6, rate, pitch=150.0)[:, None], rate, container, codec)
            upload = {"file": ("audio", audio, "application/octet-stream")}
            answer = http.post("/v1/audio/transcriptions", data={"language": "en"}, files=upload)
            heard[name] = (answer.status_code, answer.json().get("text"), offline(transcriber, audio, "English").text)
    assert {name: status for name, (status, _, _) in heard.items()} == dict.fromkeys(UPLOADS, 200)
    assert all(text == expected for _, text, expected in heard.values())


def test_silence_is_transcribed_not_refused(server):
    buffer = io.BytesIO()
    sf.write(buffer, np.zeros(16000, np.float32), 16000, format="WAV")
    with server.client(timeout=300) as http:
        answer = http.post("/v1/audio/transcriptions", files={"file": ("quiet.wav", buffer.getvalue())})
    assert answer.status_code == 200 and isinstance(answer.json()["text"], str)


def test_a_server_without_a_recogniser_says_how_to_host_one(both_families):
    with live_process("serve", both_families["speech"], env=ENV) as live, live.client(timeout=300) as http:
        answer = http.post("/v1/audio/transcriptions", files={"file": ("a.wav", b"RIFF")})
    assert answer.status_code == 404
    assert "add a Qwen3-ASR checkpoint" in json.loads(answer.text)["error"]["message"]


def test_the_earlier_asr_servers_fields_as_it_meant_them(server, transcriber, clip):
    """Its clients send `language=auto` and `return_timestamps=false`, and read `text` and `language`."""
    expected = offline(transcriber, clip)
    with server.client(timeout=300) as http:
        answer = http.post(
            "/v1/audio/transcriptions",
            data={"language": "auto", "return_timestamps": "false"},
            files={"file": ("clip.wav", clip, "audio/wav")},
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["text"], body["language"]) == (expected.text, expected.language)


def sse_data(body: str) -> list[dict]:
    assert body.endswith("\n\n") and all(line.startswith("data: ") for line in body.split("\n\n")[:-1]), body
    return [json.loads(line.removeprefix("data: ")) for line in body.split("\n\n")[:-1]]


def test_the_earlier_asr_servers_stream_route_in_its_own_shape(server, transcriber, clip):
    expected = offline(transcriber, clip, "Chinese")
    with server.client(timeout=300) as http:
        answer = http.post(
            "/v1/audio/transcriptions/stream", data={"language": "zh"}, files={"file": ("clip.wav", clip)}
        )
        bad = http.post("/v1/audio/transcriptions/stream", files={"file": ("bad.wav", b"not audio" * 20)})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    assert sse_data(answer.text) == [{"text": expected.text, "language": "Chinese", "is_final": True}, {"done": True}]
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_AUDIO" and bad.json()["statusCode"] == 400
    assert bad.json()["error"]["code"] == "unsupported_media_type"


def test_the_earlier_stream_sends_a_chunk_for_each_part_then_done():
    """Several parts (a long recording): each a chunk with its index, the last one final, then `done`."""
    parts = [TranscriptSegment(0.0, 1.0, "one", (1,), "English"), TranscriptSegment(1.0, 2.0, "二", (2,), "Chinese")]
    transcript = Transcript("English,Chinese", "one二", 2.0, 2, tuple(parts))

    async def events():
        yield TextDelta("one")
        yield parts[0]
        yield TextDelta("二")
        yield parts[1]
        yield transcript

    async def body() -> str:
        stream = events()
        first = await anext(stream)
        return b"".join([chunk async for chunk in _earlier_events(first, stream, timestamps=False)]).decode()

    assert sse_data(asyncio.run(body())) == [
        {"text": "one", "language": "English", "is_final": False, "chunk_index": 0},
        {"text": "二", "language": "Chinese", "is_final": True, "chunk_index": 1},
        {"done": True},
    ]
    assert "\\u4e8c" in asyncio.run(body())  # non-ASCII escaped, as json.dumps' defaults wrote it


def test_a_missing_model_name_or_any_name_goes_to_the_hosted_transcriber(server, transcriber, clip):
    with httpx.Client(base_url=server.base, timeout=300) as http:
        named = [
            http.post("/v1/audio/transcriptions", data=data, files={"file": ("c.wav", clip)}).json()["text"]
            for data in ({}, {"model": "asr"}, {"model": "some-other-model"})
        ]
    assert named == [offline(transcriber, clip).text] * 3


def test_the_recognisers_engine_is_in_the_metrics_under_its_model(server, clip):
    with server.client(timeout=300) as http:
        assert http.post("/v1/audio/transcriptions", files={"file": ("clip.wav", clip)}).status_code == 200
        scraped = http.get("/metrics").text
    steps = re.search(r'^qwen3_tts_engine_step_seconds_count\{model="asr"\} (\S+)$', scraped, re.MULTILINE)
    assert steps is not None and float(steps.group(1)) > 0
    assert re.search(r'^qwen3_tts_queue_depth\{model="asr"\} 0\.0$', scraped, re.MULTILINE)
    assert re.search(r'^qwen3_tts_model_state\{model="asr",state="ready"\} 1\.0$', scraped, re.MULTILINE)
