"""Deepgram's listening protocol on a live server hosting a tiny transcriber and its aligner, its key required: the
plugins themselves, unchanged, with their base URL set to the server (livekit-plugins-deepgram 1.8.9 `stt.py`:
`stream()` over the socket with `endpointing=25` and `vad_events=true`, ended by `Finalize` then `CloseStream`, and
`recognize()`, which posts a WAV to /v1/listen; pipecat-ai 1.14.0 `services/deepgram/stt.py`: `DeepgramSTTService`
through deepgram-sdk 7.17.0, which sends `Finalize` when the user stops speaking and parses every message with the
SDK's types), then raw messages as they send them. Transcripts are checked against the transcriber run alone."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import soundfile as sf
from deepgram import AsyncDeepgramClient, DeepgramClientEnvironment
from deepgram.listen.v1.types import ListenV1Metadata, ListenV1Results
from livekit import rtc
from livekit.agents import stt as livekit_stt
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import deepgram as livekit_deepgram
from pipecat.frames.frames import (
    InterimTranscriptionFrame,
    TranscriptionFrame,
)
from pipecat.services.deepgram.stt import DeepgramSTTService
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_cases import pass_by_pass
from pipecat_pipeline import heard
from provider_sockets import exchange, pcm
from qwen3_tts_server.audio.decoding import decode_g711
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.streaming import StreamingSettings
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.service.recognition.deepgram import DEEPGRAM_LISTEN_SOCKET, KEY_TERMS
from qwen3_tts_server.service.recognition.live_protocol import INTERIM_SECONDS, key_terms
from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_voice_activity import conversation  # noqa: F401 (a fixture)

KEY = "dg-test-key"
ENV = {"TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0", "API_KEY": KEY}
TOKEN = {"Authorization": f"Token {KEY}"}
RATE = 16000
TIMEOUT = 300  # a guard against a hang, not a speed limit


@pytest.fixture(scope="module")
def server(both_families) -> Iterator[LiveProcess]:
    aligner = ("--model", str(both_families["aligner"]))
    with live_process("serve", both_families["asr"], *aligner, "--preload-model", env=ENV) as live:
        yield live


@pytest.fixture(scope="module")
def transcriber(both_families) -> Transcriber:
    return Transcriber(load_asr_checkpoint(both_families["asr"]))


def socket_url(server: LiveProcess, query: str) -> str:
    return server.base.replace("http://", "ws://") + "/v1/listen?" + query


def alone(transcriber: Transcriber, wave: np.ndarray, language: str | None = None) -> str:
    """The final the streaming algorithm gives `wave` as one utterance, with the socket's pass length."""
    return pass_by_pass(transcriber, wave, StreamingSettings(chunk_seconds=INTERIM_SECONDS), language)[-1]


def test_a_socket_speaks_deepgrams_protocol_finals_on_finalize_and_interims_each_second(server, transcriber):
    """Without endpointing, only `Finalize` (and the end) makes a final; each message is what the SDK's types
    take; `CloseStream` sends the closing `Metadata`, then closes with 1000."""
    wave = voiced_glide(3.5, RATE, pitch=120.0)
    audio = pcm(wave)
    pieces = [audio[start : start + 3201] for start in range(0, len(audio), 3201)]  # odd: samples split in two
    query = "model=nova-3&encoding=linear16&sample_rate=16000&channels=1&interim_results=true&endpointing=false"
    finalize, close = json.dumps({"type": "Finalize"}), json.dumps({"type": "CloseStream"})
    keep = json.dumps({"type": "KeepAlive"})
    messages, code = asyncio.run(exchange(socket_url(server, query), TOKEN, [keep, *pieces, finalize, close]))
    assert code == 1000
    assert {message["type"] for message in messages} <= DEEPGRAM_LISTEN_SOCKET.sent_by("server")
    *results, metadata = messages
    assert metadata["type"] == "Metadata" and metadata["duration"] == pytest.approx(3.5, abs=0.01)
    ListenV1Metadata.model_validate(metadata)
    parsed = [ListenV1Results.model_validate(message) for message in results]  # every required field there
    interims, final = parsed[:-1], parsed[-1]
    assert [result.is_final for result in parsed] == [False] * len(interims) + [True]
    assert len(interims) == 3  # one a second of audio
    assert final.from_finalize and not final.speech_final
    text = alone(transcriber, wave)
    assert text and final.channel.alternatives[0].transcript == text
    assert final.start == 0 and final.duration == pytest.approx(3.5, abs=0.01)
    words = final.channel.alternatives[0].words
    assert "".join(word.punctuated_word for word in words) == "".join(text.split())  # every word, in order
    assert [word.start for word in words] == sorted(word.start for word in words) and words[-1].end <= 3.5
    assert [interim.duration for interim in interims] == [1.0, 2.0, 3.0]
    assert all(result.metadata.model_info.name == "nova-3" for result in parsed)


def test_a_finalize_with_nothing_held_answers_an_empty_final_at_once(server):
    query = "encoding=linear16&sample_rate=16000"
    chunks = [json.dumps({"type": "Finalize"}), json.dumps({"type": "CloseStream"})]
    messages, code = asyncio.run(exchange(socket_url(server, query), TOKEN, chunks))
    assert [message["type"] for message in messages] == ["Results", "Metadata"] and code == 1000
    result = messages[0]
    assert result["is_final"] and result["from_finalize"] and result["channel"]["alternatives"][0]["transcript"] == ""


def test_endpointing_makes_speech_final_finals_with_speech_started_and_utterance_end(server, conversation):  # noqa: F811
    wave, spans = conversation
    audio = pcm(wave)
    query = "encoding=linear16&sample_rate=16000&vad_events=true&endpointing=25&utterance_end_ms=1000&language=en"
    pieces = [audio[start : start + 3200] for start in range(0, len(audio), 3200)]
    messages, _ = asyncio.run(
        exchange(socket_url(server, query), TOKEN, [*pieces, json.dumps({"type": "CloseStream"})])
    )
    kinds = [message["type"] for message in messages]
    assert kinds.count("SpeechStarted") == 2 and kinds.count("UtteranceEnd") == 2
    finals = [message for message in messages if message["type"] == "Results" and message["is_final"]]
    assert [final["speech_final"] for final in finals] == [True, True]
    for (start, end), final, started in zip(
        spans, finals, (message for message in messages if message["type"] == "SpeechStarted"), strict=True
    ):
        assert start - 0.5 <= started["timestamp"] <= start
        assert final["start"] == pytest.approx(started["timestamp"], abs=0.05)
        assert end <= final["start"] + final["duration"] <= end + 1.0
        assert final["channel"]["alternatives"][0]["transcript"]
        assert "languages" not in final["channel"]["alternatives"][0]  # the language was forced
    assert kinds[-1] == "Metadata"
    for final in finals:  # each UtteranceEnd right after its final, at its last word's end
        after = messages[messages.index(final) + 1]
        assert after["type"] == "UtteranceEnd"
        assert after["last_word_end"] == final["channel"]["alternatives"][0]["words"][-1]["end"]


def test_refusals_come_as_deepgram_errors_and_the_socket_goes_on(server):
    async def scenario():
        async with connect(socket_url(server, "encoding=linear16"), additional_headers=TOKEN) as ws:
            answers = []
            too_much = bytes(2 * RATE * 31)  # more audio at once than a session holds waiting (30 s)
            for bad in ("{not json", json.dumps({"type": "Speak"}), json.dumps([1]), too_much):
                await ws.send(bad)
                answers.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"type": "Finalize"}))
            answers.append(json.loads(await ws.recv()))
            return answers

    *errors, final = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert [error["type"] for error in errors] == ["Error"] * 4
    assert all(error["err_code"] == "invalid_request" and error["err_msg"] for error in errors[:3])
    assert "unknown message type 'Speak'" in errors[1]["err_msg"]
    assert errors[3]["err_code"] == "pending_audio_limit"
    assert final["type"] == "Results" and final["from_finalize"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("encoding=opus", "encoding"),
        ("encoding=linear16&sample_rate=4000", "sample_rate"),
        ("encoding=linear16&language=xx", "language"),
        ("encoding=linear16&multichannel=true&channels=2", "multichannel"),
        ("encoding=linear16&endpointing=soon", "endpointing"),
        ("encoding=linear16&interim_results=maybe", "interim_results"),
    ],
)
def test_a_bad_query_is_an_error_then_a_close_with_1008(server, query, param):
    messages, code = asyncio.run(exchange(socket_url(server, query), TOKEN, []))
    assert code == 1008
    assert [message["type"] for message in messages] == ["Error"] and param in messages[0]["err_msg"]


def test_a_wrong_key_is_closed_with_1008(server):
    async def scenario():
        async with connect(
            socket_url(server, "encoding=linear16"), additional_headers={"Authorization": "Token no"}
        ) as ws:
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            return ws.close_code

    assert asyncio.run(scenario()) == 1008


def test_mulaw_at_8_khz_in_two_channels_is_mixed_to_what_one_channel_gives(server):
    """G.711 from a phone line: the same sound in two interleaved channels gives the final one channel of it gives."""
    table = decode_g711(bytes(range(256)), "pcm_mulaw")
    wave = voiced_glide(2.5, 8000, pitch=110.0)
    mono = np.abs(wave[:, None] - table[None, :]).argmin(axis=1).astype(np.uint8)  # each sample's nearest byte
    stereo = np.repeat(mono, 2)
    end = [json.dumps({"type": "Finalize"}), json.dumps({"type": "CloseStream"})]

    def final(audio: np.ndarray, channels: int) -> dict:
        query = f"encoding=mulaw&sample_rate=8000&channels={channels}&endpointing=false"
        messages, _ = asyncio.run(
            exchange(socket_url(server, query), TOKEN, [audio.tobytes()[:999], audio.tobytes()[999:], *end])
        )
        assert messages[-1]["channels"] == channels and messages[-1]["duration"] == pytest.approx(2.5)
        (result,) = [message for message in messages if message["type"] == "Results" and message["is_final"]]
        return result

    one, two = final(mono, 1), final(stereo, 2)
    assert one["channel"]["alternatives"][0]["transcript"]
    assert two["channel"] == one["channel"] and two["duration"] == one["duration"] == pytest.approx(2.5, abs=0.01)


def test_livekits_stream_gets_speech_events_interims_and_finals(server, conversation):  # noqa: F811
    """Real-time frames of two sentences with a pause: START_OF_SPEECH, interims, a final and END_OF_SPEECH for each
    (speech_final on the silence), each final's words timed within its speech; the stream ends once the server
    closes the socket after `CloseStream`."""
    wave, spans = conversation
    audio = pcm(wave)

    async def scenario():
        async with livekit_http.open():
            stt = livekit_deepgram.STT(api_key=KEY, base_url=server.base + "/v1/listen", language="en-US")
            stream = stt.stream()
            step = RATE // 10
            for start in range(0, len(audio) // 2, step):
                chunk = audio[2 * start : 2 * (start + step)]
                frame = rtc.AudioFrame(chunk, RATE, 1, len(chunk) // 2)
                stream.push_frame(frame)
                await asyncio.sleep(0.02)
            stream.flush()
            stream.end_input()
            events = [event async for event in stream]
            await stt.aclose()
            return events

    events = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    kinds = [event.type for event in events if event.type != livekit_stt.SpeechEventType.RECOGNITION_USAGE]
    kind = livekit_stt.SpeechEventType
    turns = [kind.START_OF_SPEECH, kind.INTERIM_TRANSCRIPT, kind.FINAL_TRANSCRIPT, kind.END_OF_SPEECH]
    collapsed = [each for index, each in enumerate(kinds) if index == 0 or kinds[index - 1] != each]
    assert collapsed == turns * 2
    finals = [event.alternatives[0] for event in events if event.type == kind.FINAL_TRANSCRIPT]
    for (start, end), final in zip(spans, finals, strict=True):
        assert final.text and final.language == "en-US" and final.words
        assert start - 0.5 <= final.start_time <= final.words[0].start_time <= final.end_time <= end + 1.0


def test_livekits_recognize_posts_a_wav_and_gets_the_transcript_timed_by_the_aligner(server, transcriber):
    wave = voiced_glide(2.0, RATE, pitch=150.0)

    async def scenario():
        async with livekit_http.open():
            stt = livekit_deepgram.STT(api_key=KEY, base_url=server.base + "/v1/listen", language="en")
            frame = rtc.AudioFrame(pcm(wave), RATE, 1, len(wave))
            return await stt.recognize([frame])

    event = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    (alternative,) = event.alternatives
    buffer = io.BytesIO()
    sf.write(buffer, wave, RATE, format="WAV", subtype="PCM_16")
    (expected,) = transcriber.transcribe([sf.read(io.BytesIO(buffer.getvalue()), dtype="float32")[0]], ["English"])
    assert alternative.text == expected.text and alternative.text
    assert alternative.words and 0 <= alternative.words[0].start_time <= alternative.words[-1].end_time <= 2.0


def test_deepgrams_sdk_transcribes_a_file_and_a_url_is_refused(server):
    async def scenario():
        environment = DeepgramClientEnvironment(
            base=server.base, production=server.base.replace("http", "ws"), agent=server.base, agent_rest=server.base
        )
        client = AsyncDeepgramClient(api_key=KEY, environment=environment)
        buffer = io.BytesIO()
        sf.write(buffer, voiced_glide(1.5, 22050), 22050, format="FLAC")
        response = await client.listen.v1.media.transcribe_file(request=buffer.getvalue(), model="nova-3")
        async with httpx.AsyncClient(base_url=server.base, headers=TOKEN) as http:
            refused = await http.post("/v1/listen", json={"url": "http://example.invalid/a.wav"})
            empty = await http.post("/v1/listen", content=b"", headers={"content-type": "audio/wav"})
        return response, refused, empty

    response, refused, empty = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    alternative = response.results.channels[0].alternatives[0]
    assert alternative.transcript and alternative.words
    assert response.metadata.duration == pytest.approx(1.5, abs=0.01)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "url"
    assert empty.status_code == 400


def test_pipecats_service_pushes_interims_and_the_final_finalize_asks_for(server, conversation):  # noqa: F811
    wave, _ = conversation
    first = pcm(wave[: int(3.5 * RATE)])

    service = DeepgramSTTService(api_key=KEY, base_url=server.base, sample_rate=RATE)
    frames = asyncio.run(asyncio.wait_for(heard(service, first, RATE), TIMEOUT))
    assert any(isinstance(frame, InterimTranscriptionFrame) for frame in frames)
    final = frames[-1]
    assert isinstance(final, TranscriptionFrame) and final.text
    assert final.result.is_final


def test_key_terms_become_the_transcribers_context():
    items = [("keyterm", "Qwen"), ("keyterm", "LiveKit"), ("keywords", "Pipecat:2"), ("keyterm", "Qwen"), ("x", "y")]
    assert key_terms(items, KEY_TERMS) == "Qwen, LiveKit, Pipecat"
