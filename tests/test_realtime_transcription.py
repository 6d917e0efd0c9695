"""OpenAI's realtime transcription sessions (WS /v1/realtime?intent=transcription) against a live server hosting a
tiny transcriber, driven by the voice agents' own clients: LiveKit's `openai.STT(...).stream()` (server VAD, a final
per sentence) and Pipecat's `OpenAIRealtimeSTTService` (a commit at its local VAD's end of speech), each final the
one a session gives in this process for the same audio; the current form through the openai SDK's realtime client;
the beta form as LiveKit's earlier plugin sent it (`OpenAI-Beta: realtime=v1`, server VAD, 50 ms appends, no
commit) on speech spoken by espeak-ng; LiveKit's `gpt-realtime-whisper` STT, which commits at its own VAD's pauses
with no turn detection; client commits in the middle of speech beside server VAD; G.711 audio; errors as error
events."""

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
from qwen3_tts_server.service.recognition.live import LiveTranscript
from qwen3_tts_server.service.recognition.realtime import REALTIME_TRANSCRIPTION
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import server, transcriber  # noqa: F401 (fixtures)
from test_voice_activity import audible, conversation, spoken  # noqa: F401 (a fixture)

TIMEOUT = 120


@pytest.fixture(scope="module")
def short_pauses(tmp_path_factory) -> np.ndarray:
    """Three sentences 0.4 s apart (a pause LiveKit's VAD ends speech at, server VAD at its default does not), at
    16 kHz, with 0.5 s of silence before and 1.2 s after."""
    folder = tmp_path_factory.mktemp("espeak")
    pieces = [np.zeros(8000, np.float32)]
    for text in ("Good morning.", "How can I help you today?", "Tell me what you need."):
        wave = spoken(text, folder)
        start, end = audible(wave)
        pieces += [wave[int(start * 16000) : int(end * 16000) + 800], np.zeros(int(0.35 * 16000), np.float32)]
    return np.concatenate([*pieces, np.zeros(int(0.85 * 16000), np.float32)])


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
    # the passes at 2 and 4 s give deltas of the item, each only appended to the ones before (the commit, heard
    # at once, goes out whenever it comes: the audio came faster than real time)
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
                {"type": "input_audio_buffer.commit"},  # nothing appended: OpenAI's error for it
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
    # the empty commit's answer comes from the session's listening task, whenever it hears it: among the others
    assert kinds[:2] == ["transcription_session.created", "transcription_session.updated"]
    assert sorted(kinds[2:8]) == ["error"] * 5 + ["input_audio_buffer.cleared"]
    assert kinds[8:] == ["input_audio_buffer.committed", "conversation.item.input_audio_transcription.completed"]
    errors = [event["error"] for event in events if event["type"] == "error"]
    (empty,) = [error for error in errors if error["code"] == "input_audio_buffer_commit_empty"]
    errors.remove(empty)
    assert empty["type"] == "invalid_request_error" and "0.00ms of audio" in empty["message"]
    unknown, bad_audio, bad_language, bad_threshold = errors
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
    # voice activity as soon as it is heard (the audio comes faster than real time, so the second sentence may
    # start before the first's final), each final after its speech ended
    speech = [SpeechEventType.START_OF_SPEECH, SpeechEventType.END_OF_SPEECH]
    results = [SpeechEventType.FINAL_TRANSCRIPT, SpeechEventType.RECOGNITION_USAGE]
    assert len(expected) == 2 and [kind for kind in kinds if kind in speech] == speech * len(expected)
    assert [kind for kind in kinds if kind in results] == results * len(expected)
    ends = [index for index, kind in enumerate(kinds) if kind == SpeechEventType.END_OF_SPEECH]
    finals_at = [index for index, kind in enumerate(kinds) if kind == SpeechEventType.FINAL_TRANSCRIPT]
    assert all(end < final for end, final in zip(ends, finals_at, strict=True))
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


def test_client_commits_beside_server_vad_lose_no_speech(server, conversation):  # noqa: F811
    """Server voice activity on (the default for a session that sets none) and a client that commits in the middle
    of each sentence, then once more at once: each commit closes the item with all its audio, the rest of the
    sentence is the next item at once, and the two together are the whole sentence; the second commit of the pair
    is OpenAI's error for an empty buffer."""
    wave, spans = conversation
    data = (np.clip(wave, -1, 1) * 32767).astype("<i2").tobytes()  # 16 kHz: the session's own rate, no resampling
    piece = 800  # samples: 50 ms appends
    commits = [round((start + end) / 2 * 16000 / piece) * piece for start, end in spans]  # mid-sentence
    update = {
        "type": "session.update",
        "session": {
            "type": "transcription",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}, "transcription": {"language": "en"}}},
        },
    }

    async def scenario():
        url = server.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription&model=gpt-4o-transcribe"
        async with connect(url) as ws:
            await ws.send(json.dumps(update))
            for start in range(0, len(wave), piece):
                if start in commits:
                    await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
                    await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))  # nothing since: refused
                chunk = base64.b64encode(data[2 * start : 2 * (start + piece)]).decode()
                await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
            events = []
            while sum(event["type"].endswith(".completed") for event in events) < 4:
                events.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
            return events

    events = asyncio.run(scenario())
    assert events[1]["type"] == "session.updated"
    assert events[1]["session"]["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    errors = [event["error"] for event in events if event["type"] == "error"]
    assert [error["code"] for error in errors] == ["input_audio_buffer_commit_empty"] * 2
    committed = [event for event in events if event["type"] == "input_audio_buffer.committed"]
    items = [event["item_id"] for event in committed]
    assert len(set(items)) == 4 and [event["previous_item_id"] for event in committed] == [None, *items[:-1]]
    completed = {event["item_id"]: event for event in events if event["type"].endswith(".completed")}
    for item in items:  # each completed after its committed, with text
        mine = [event["type"] for event in events if event.get("item_id") == item]
        assert mine.index("input_audio_buffer.committed") < mine.index(
            "conversation.item.input_audio_transcription.completed"
        )
        assert completed[item]["transcript"] and completed[item]["languages"] == [{"code": "en"}]
    started = [event for event in events if event["type"] == "input_audio_buffer.speech_started"]
    stopped = [event for event in events if event["type"] == "input_audio_buffer.speech_stopped"]
    assert [event["item_id"] for event in started] == items[::2]  # each sentence started in its first item
    for k, commit in enumerate(commits):  # the commit cuts the sentence: its two items hold all of it
        first, rest = (completed[item]["usage"]["seconds"] for item in items[2 * k : 2 * k + 2])
        assert first == pytest.approx(commit / 16000 - started[k]["audio_start_ms"] / 1000, abs=0.01)
        # the rest from the commit on, to where speech stopped (or where that was found, 500 ms of silence later)
        assert -0.01 <= rest - (stopped[k]["audio_end_ms"] / 1000 - commit / 16000) <= 0.51


def test_livekits_realtime_whisper_stt_gets_every_sentence(server, short_pauses):  # noqa: F811
    """livekit-plugins-openai's `STT(model="gpt-realtime-whisper", use_realtime=True)`: its session sets no turn
    detection (none for that model, as at OpenAI) and its own VAD commits at each pause; 20 ms frames pushed in
    real time. Every sentence is an item with its transcript, and no item is empty."""
    data = pcm24k(short_pauses)
    frame = 480 * 2  # bytes: 20 ms at 24 kHz

    async def scenario():
        async with livekit_http.open():
            options = {"model": "gpt-realtime-whisper", "language": "en", "use_realtime": True}
            stt = livekit_openai.STT(base_url=server.base + "/v1", api_key="unused", **options)
            stream = stt.stream()
            loop = asyncio.get_running_loop()
            began = loop.time()
            for index, start in enumerate(range(0, len(data), frame)):
                await asyncio.sleep(max(0.0, began + index * 0.02 - loop.time()))
                piece = data[start : start + frame]
                stream.push_frame(rtc.AudioFrame(piece, 24000, 1, len(piece) // 2))
            events = []
            while sum(event.type == SpeechEventType.RECOGNITION_USAGE for event in events) < 3:
                events.append(await asyncio.wait_for(stream.__anext__(), TIMEOUT))
            stream.end_input()
            await stream.aclose()
            await stt.aclose()
            return events

    events = asyncio.run(scenario())
    finals = [event for event in events if event.type == SpeechEventType.FINAL_TRANSCRIPT]
    # a completed per commit: each of the three with its sentence's transcript (an empty one would have no final)
    assert len(finals) == 3 and all(event.alternatives[0].text for event in finals)
    assert len({event.request_id for event in finals}) == 3


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
