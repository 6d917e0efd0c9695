"""OpenAI's realtime transcription sessions (WS /v1/realtime?intent=transcription) against a live server hosting a
tiny transcriber, driven by the voice agents' own clients: LiveKit's `openai.STT(...).stream()` (server VAD, a final
per sentence) and Pipecat's `OpenAIRealtimeSTTService` (a commit at its local VAD's end of speech), each final the
one a session gives in this process for the same audio; the current form through the openai SDK's realtime client;
the beta form as LiveKit's earlier plugin sent it (`OpenAI-Beta: realtime=v1`, server VAD, 50 ms appends, no
commit) on speech spoken by espeak-ng; G.711 audio; errors as error events."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import openai
import pytest
import soxr
from livekit import rtc
from livekit.agents.stt import SpeechEventType
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import openai as livekit_openai
from pipecat.frames.frames import (
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.services.openai.stt import OpenAIRealtimeSTTService
from websockets.asyncio.client import connect

from live_cases import session_events
from pipecat_pipeline import Collected, running
from qwen3_tts_server.audio.decoding import pcm_samples
from qwen3_tts_server.audio.voice_activity import VoiceActivitySettings
from qwen3_tts_server.model.asr.streaming import IncrementalPasses, LiveUtterance
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.service.live_recognition import LiveTranscript
from qwen3_tts_server.service.realtime_transcription import REALTIME_TRANSCRIPTION
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import server, transcriber  # noqa: F401 (fixtures)
from test_voice_activity import conversation  # noqa: F401 (a fixture)

TIMEOUT = 120


def pcm24k(wave16k: np.ndarray) -> bytes:
    return (np.clip(soxr.resample(wave16k, 16000, 24000), -1, 1) * 32767).astype("<i2").tobytes()


def heard_by_the_server(chunks: list[bytes]) -> np.ndarray:
    """What a session makes of 24 kHz PCM appends: each resampled as it comes, the rest at the commit."""
    stream = soxr.ResampleStream(24000, 16000, 1, quality="HQ")
    pieces = [stream.resample_chunk(np.frombuffer(chunk, "<i2").astype(np.float32) / 32768.0) for chunk in chunks]
    return np.concatenate([*pieces, stream.resample_chunk(np.zeros(0, np.float32), last=True)]).astype(np.float32)


def final_text(model: Transcriber, wave: np.ndarray, language: str | None) -> str:
    utterance = LiveUtterance(model, IncrementalPasses(model, "", language))
    utterance.feed(wave)
    utterance.finish()
    return utterance.text


def test_the_openai_sdk_with_pipecats_session_gets_deltas_and_the_transcript(server, transcriber):  # noqa: F811
    chunks = [pcm24k(voiced_glide(5.0, pitch=140.0))[i : i + 4800] for i in range(0, 240000, 4800)]  # 100 ms
    expected = final_text(transcriber, heard_by_the_server(chunks), "English")
    session = {
        "type": "transcription",
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "gpt-realtime-whisper", "language": "en"},
                "turn_detection": None,
            }
        },
    }

    async def scenario():
        client = openai.AsyncOpenAI(api_key="unused", base_url=server.base + "/v1")
        events = []
        async with client.realtime.connect(extra_query={"intent": "transcription"}) as connection:
            created = await asyncio.wait_for(connection.recv(), TIMEOUT)
            await connection.session.update(session=session)
            updated = await asyncio.wait_for(connection.recv(), TIMEOUT)
            for chunk in chunks:
                await connection.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
            await connection.input_audio_buffer.commit()
            while not events or events[-1].type != "conversation.item.input_audio_transcription.completed":
                events.append(await asyncio.wait_for(connection.recv(), TIMEOUT))
        return created, updated, events

    created, updated, events = asyncio.run(scenario())
    assert created.type == "session.created" and updated.type == "session.updated"
    assert updated.session.audio.input.turn_detection is None
    assert updated.session.audio.input.transcription.language == "en"
    (committed,) = [event for event in events if event.type == "input_audio_buffer.committed"]
    completed = events[-1]
    deltas = [event for event in events if event.type == "conversation.item.input_audio_transcription.delta"]
    assert len(events) == len(deltas) + 2 and committed.previous_item_id is None
    # text while the audio still arrives (the passes at 2 and 4 s), each delta only appended to the ones before
    assert events[0].type == "conversation.item.input_audio_transcription.delta"
    assert deltas and {delta.item_id for delta in deltas} == {committed.item_id}
    assert completed.item_id == committed.item_id and completed.transcript == expected
    assert completed.usage.type == "duration" and completed.usage.seconds == pytest.approx(5.0, abs=0.01)


def test_livekits_beta_session_with_server_vad_gets_an_item_per_sentence(server, conversation):  # noqa: F811
    wave, spans = conversation
    data = pcm24k(wave)
    update = {
        "type": "transcription_session.update",
        "session": {
            "input_audio_format": "pcm16",
            "input_audio_transcription": {"model": "gpt-4o-mini-transcribe", "prompt": "", "language": "en"},
            "turn_detection": {
                "type": "server_vad",
                "threshold": 0.5,
                "prefix_padding_ms": 600,
                "silence_duration_ms": 350,
            },
        },
    }

    async def scenario():
        url = server.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
        headers = {"Authorization": "Bearer unused", "OpenAI-Beta": "realtime=v1", "User-Agent": "LiveKit Agents"}
        async with connect(url, additional_headers=headers) as ws:
            await ws.send(json.dumps(update))  # at once, as LiveKit does: not waiting for created
            for start in range(0, len(data), 2400):  # 50 ms appends
                await ws.send(
                    json.dumps(
                        {
                            "type": "input_audio_buffer.append",
                            "audio": base64.b64encode(data[start : start + 2400]).decode(),
                        }
                    )
                )
            events = []
            while sum(event["type"].endswith(".completed") for event in events) < 2:
                events.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            return events

    events = asyncio.run(scenario())
    kinds = [event["type"] for event in events]
    assert set(kinds) <= REALTIME_TRANSCRIPTION.sent_by("server")  # every event declared (the protocol reference)
    assert kinds[:2] == ["transcription_session.created", "transcription_session.updated"]
    assert events[1]["session"]["turn_detection"]["prefix_padding_ms"] == 600
    items = [event["item_id"] for event in events if event["type"] == "input_audio_buffer.committed"]
    assert len(items) == 2 and items[0] != items[1]
    for item, (start, end) in zip(items, spans, strict=True):
        mine = [event for event in events if event.get("item_id") == item]
        order = [event["type"].rsplit(".", 1)[-1] for event in mine if "delta" not in event["type"]]
        assert order == ["speech_started", "speech_stopped", "committed", "completed"]
        assert start - 0.7 <= mine[0]["audio_start_ms"] / 1000 <= start
        assert end <= mine[1]["audio_end_ms"] / 1000 <= end + 1.0
        assert mine[-1]["transcript"] and mine[-1]["usage"]["type"] == "duration"
    committed = [event for event in events if event["type"] == "input_audio_buffer.committed"]
    assert committed[0]["previous_item_id"] is None and committed[1]["previous_item_id"] == items[0]


def test_g711_audio_and_bad_events(server):  # noqa: F811
    mulaw = np.random.default_rng(3).integers(0, 256, 8000 * 3, dtype=np.uint8).tobytes()

    async def scenario():
        url = server.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
        async with connect(url, additional_headers={"OpenAI-Beta": "realtime=v1"}) as ws:
            received = [json.loads(await ws.recv())]
            session = {"input_audio_format": "g711_ulaw", "turn_detection": None}
            for event in (
                {"type": "transcription_session.update", "session": session},
                {"type": "input_audio_buffer.commit"},  # nothing appended: nothing happens
                {"type": "response.create", "event_id": "evt_1"},
                {"type": "input_audio_buffer.append", "audio": "not base64!"},
                {"type": "transcription_session.update", "session": {"input_audio_transcription": {"language": "xx"}}},
                {
                    "type": "transcription_session.update",
                    "session": {"turn_detection": {"type": "server_vad", "threshold": "high"}},
                },
                {"type": "input_audio_buffer.clear"},
                {"type": "input_audio_buffer.append", "audio": base64.b64encode(mulaw).decode()},
                {"type": "input_audio_buffer.commit"},
            ):
                await ws.send(json.dumps(event))
            while received[-1]["type"] != "conversation.item.input_audio_transcription.completed":
                received.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            return received

    events = asyncio.run(scenario())
    assert {event["type"] for event in events} <= REALTIME_TRANSCRIPTION.sent_by("server")
    kinds = [event["type"] for event in events if "delta" not in event["type"]]
    assert kinds == [
        "transcription_session.created",
        "transcription_session.updated",
        "error",
        "error",
        "error",
        "error",
        "input_audio_buffer.cleared",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed",
    ]
    unknown, bad_audio, bad_language, bad_threshold = (event["error"] for event in events if event["type"] == "error")
    assert bad_threshold["param"] == "session.turn_detection.threshold" and "'high'" in bad_threshold["message"]
    assert unknown["event_id"] == "evt_1" and "response.create" in unknown["message"]
    assert bad_audio["param"] == "audio" and "unsupported language 'xx'" in bad_language["message"]
    assert events[-1]["usage"]["seconds"] == pytest.approx(3.0, abs=0.01)


def test_a_session_without_intent_transcription_is_refused(server):  # noqa: F811
    async def scenario():
        async with connect(server.base.replace("http", "ws", 1) + "/v1/realtime?model=gpt-realtime") as ws:
            return json.loads(await ws.recv())

    refused = asyncio.run(scenario())
    assert refused["type"] == "error" and "intent=transcription" in refused["error"]["message"]


def served_finals(model: Transcriber, data: bytes, voice_activity: VoiceActivitySettings) -> list[str]:
    """The final texts a realtime session gives for 24 kHz PCM16 `data` under server VAD, run in this process."""
    events = session_events(model, [pcm_samples(data, 2, 1)], 24000, voice_activity, commit=False, language="English")
    return [event.text for event in events if isinstance(event, LiveTranscript) and event.final]


def test_livekits_openai_stt_stream_gets_each_sentence(server, transcriber, conversation):  # noqa: F811
    """livekit-plugins-openai's realtime STT stream, as a LiveKit agent runs it: 20 ms frames at 24 kHz; the
    plugin's own session (the current form, the model in the URL, server VAD at its defaults)."""
    wave, _ = conversation
    data = pcm24k(wave)
    expected = served_finals(transcriber, data, VoiceActivitySettings(0.5, 600, 350))  # the plugin's turn detection

    async def scenario():
        async with livekit_http.open():
            options = {"model": "gpt-4o-transcribe", "language": "en", "use_realtime": True}
            stt = livekit_openai.STT(base_url=server.base + "/v1", api_key="unused", **options)
            stream = stt.stream()
            for start in range(0, len(data), 960):  # 20 ms
                piece = data[start : start + 960]
                stream.push_frame(rtc.AudioFrame(piece, 24000, 1, len(piece) // 2))
            stream.end_input()
            events = []
            while sum(event.type == SpeechEventType.RECOGNITION_USAGE for event in events) < len(expected):
                events.append(await asyncio.wait_for(stream.__anext__(), TIMEOUT))
            await stream.aclose()
            await stt.aclose()
            return events

    events = asyncio.run(scenario())
    kinds = [event.type for event in events if event.type != SpeechEventType.INTERIM_TRANSCRIPT]
    assert len(expected) == 2 and kinds == [
        SpeechEventType.START_OF_SPEECH,
        SpeechEventType.END_OF_SPEECH,
        SpeechEventType.FINAL_TRANSCRIPT,
        SpeechEventType.RECOGNITION_USAGE,
    ] * len(expected)
    finals = [event.alternatives[0].text for event in events if event.type == SpeechEventType.FINAL_TRANSCRIPT]
    assert finals == expected
    # the first sentence's pass at 2 s: the deltas LiveKit joins, before that sentence's final, of its item
    first_final = next(event for event in events if event.type == SpeechEventType.FINAL_TRANSCRIPT)
    interim = events[: events.index(first_final)]
    interim = [event for event in interim if event.type == SpeechEventType.INTERIM_TRANSCRIPT]
    assert interim and {event.request_id for event in interim} == {first_final.request_id}
    usage = [event.recognition_usage for event in events if event.type == SpeechEventType.RECOGNITION_USAGE]
    assert all(1.0 < item.audio_duration < 4.0 for item in usage)


def test_pipecats_openai_realtime_stt_service_gets_interims_and_the_transcript(server, transcriber):  # noqa: F811
    """Pipecat's OpenAIRealtimeSTTService at its defaults (the current session form, no turn detection): a 24 kHz
    pipeline's audio frames, then its local VAD's end of speech, on which the service commits."""
    data = pcm24k(voiced_glide(5.0, pitch=140.0))
    expected = final_text(transcriber, heard_by_the_server([data]), "English")

    async def scenario():
        stt = OpenAIRealtimeSTTService(api_key="unused", base_url=server.base.replace("http", "ws", 1) + "/v1/realtime")
        heard = Collected((TranscriptionFrame, InterimTranscriptionFrame), TranscriptionFrame)
        async with running(stt, heard, audio_in_sample_rate=24000) as pipeline:
            while not stt._session_ready:  # the service says nothing public when its session.update is answered
                await asyncio.sleep(0.05)
            audio = [InputAudioRawFrame(data[i : i + 4800], 24000, 1) for i in range(0, len(data), 4800)]  # 100 ms
            await pipeline.queue_frames([*audio, VADUserStoppedSpeakingFrame()])
        return heard.frames

    *interims, final = asyncio.run(scenario())
    assert isinstance(final, TranscriptionFrame) and final.text == expected
    # each delta (the passes at 2 and 4 s) an interim frame of the same item
    assert interims and all(isinstance(frame, InterimTranscriptionFrame) and frame.text for frame in interims)
    assert {frame.result["item_id"] for frame in interims} == {final.result["item_id"]}


def test_a_prompt_past_the_context_bound_is_refused_and_the_session_goes_on(server):  # noqa: F811
    """The same bound as the HTTP routes' `prompt`: an error event naming the field, the session as it was."""
    audio = base64.b64encode(pcm24k(voiced_glide(1.0, 16000, pitch=140.0))).decode()

    def update(prompt: str) -> str:
        session = {"type": "transcription", "audio": {"input": {"transcription": {"prompt": prompt}}}}
        return json.dumps({"type": "session.update", "session": session})

    async def scenario():
        url = server.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
        async with connect(url) as ws:
            received = [json.loads(await ws.recv())]
            for event in (update("Qwen " * 20_000), update("<|audio_pad|>"), update("Qwen")):
                await ws.send(event)
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            while received[-1]["type"] != "conversation.item.input_audio_transcription.completed":
                received.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            return received

    events = asyncio.run(scenario())
    long, placeholder = (event["error"] for event in events if event["type"] == "error")
    for error in (long, placeholder):
        assert error["param"] == "session.audio.input.transcription.prompt", error
    assert "characters long; the model's context takes at most 1024 tokens" in long["message"]
    assert "audio placeholder" in placeholder["message"]
    (updated,) = (event for event in events if event["type"] == "session.updated")
    assert updated["session"]["audio"]["input"]["transcription"]["prompt"] == "Qwen"
