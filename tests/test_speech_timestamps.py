"""Word timestamps of synthesised speech on a live server hosting a speech model and a ForcedAligner
alone: OpenAI-shaped SSE events, Kokoro's captioned speech, our WebSocket's `segment.words`, and ElevenLabs'
WebSocket as LiveKit's and Pipecat's ElevenLabs plugins speak it, run unchanged. The aligner has random weights, so
its times are arbitrary: what is checked is what holds for any aligner (every word the client sent, once, in order,
start <= end, inside the audio, times that never go back, offsets that add up across segments)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Iterator

import av
import httpx
import numpy as np
import pytest
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import elevenlabs as livekit_elevenlabs
from pipecat.frames.frames import (
    ErrorFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
from websockets.asyncio.client import connect

from pipecat_pipeline import Collected, running
from qwen3_tts_server.model.asr.word_split import spaced_words
from qwen3_tts_server.service.speech.elevenlabs import ELEVENLABS_SOCKET
from qwen3_tts_server.service.speech.realtime import SPEECH_SOCKET
from qwen3_tts_server.testing.live_server import LiveProcess, live_process

TEXT = "Hello there, my friend. It costs $5 today! Goodbye now."
ENV = {"MAX_REQUEST_FRAMES": "30", "TEXT_NORMALIZE": "true", "IDLE_TIMEOUT": "0"}
TIMEOUT = 300  # a guard against a hang, not a speed limit


def speech_and_aligner(both_families, env: dict[str, str]) -> Iterator[LiveProcess]:
    """A live server hosting a speech model and a ForcedAligner, loaded before it says ready."""
    with live_process(
        "serve", both_families["speech"], "--model", str(both_families["aligner"]), "--preload-model", env=env
    ) as live:
        yield live


@pytest.fixture(scope="module")
def server(both_families) -> Iterator[LiveProcess]:
    yield from speech_and_aligner(both_families, ENV)


def pcm_seconds(pcm: bytes, rate: int = 24000) -> float:
    return len(pcm) / 2 / rate


def decoded_seconds(data: bytes) -> float:
    """The duration of an encoded file, decoded whole by PyAV."""
    with av.open(io.BytesIO(data)) as container:
        frames = [frame for frame in container.decode(audio=0)]
    return sum(frame.samples for frame in frames) / frames[0].sample_rate


def assert_timed(words: list[tuple[str, float, float]], text: str, seconds: float) -> None:
    """Every word of `text`, once and in order, each start <= end, inside `seconds` of audio, never going back."""
    assert [word for word, _, _ in words] == spaced_words(text)
    assert all(0.0 <= start <= end <= seconds + 0.01 for _, start, end in words), (words, seconds)
    starts = [start for _, start, _ in words]
    assert starts == sorted(starts)


def test_sse_events_carry_each_segments_words_and_the_offsets_add_up(server):
    body = {"input": TEXT, "voice": "ryan", "response_format": "pcm", "stream_format": "sse", "timestamps": True}
    with server.client(timeout=TIMEOUT) as http:
        events = [
            json.loads(line[6:])
            for line in http.post("/v1/audio/speech", json=body).text.splitlines()
            if line.startswith("data: ")
        ]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    timed = [event for event in events if event["type"] == "speech.words"]
    assert events[-1]["type"] == "speech.audio.done" and len(timed) >= 1
    assert [event["segment"] for event in timed] == list(range(len(timed)))
    assert timed[0]["start"] == 0.0 and abs(timed[-1]["end"] - pcm_seconds(pcm)) < 0.01
    assert all(before["end"] == after["start"] for before, after in zip(timed, timed[1:], strict=False))
    assert " ".join(event["text"] for event in timed) == TEXT
    words = [(w["word"], w["start"], w["end"]) for event in timed for w in event["words"]]
    assert_timed(words, TEXT, pcm_seconds(pcm))
    assert "5" in [word for word, _, _ in words]  # the client's "$5", spoken as "five dollars"


def test_chinese_is_timed_character_by_character_as_the_official_aligner_splits_it(server):
    text = "你好，世界。今天天气很好。"
    body = {"input": text, "voice": "ryan", "language": "Chinese", "stream_format": "sse", "timestamps": True}
    with server.client(timeout=TIMEOUT) as http:
        lines = http.post("/v1/audio/speech", json=body | {"response_format": "pcm"}).text.splitlines()
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    words = [(w["word"], w["start"], w["end"]) for e in events if e["type"] == "speech.words" for w in e["words"]]
    assert [word for word, _, _ in words] == list("你好世界今天天气很好")
    assert_timed(words, text, pcm_seconds(pcm))


def test_a_text_the_aligner_cannot_split_still_plays_and_says_why(server):
    """Korean needs the official word list (none here): the segment's audio plays whole, its words event carries
    the error naming the setting, and the stream ends as usual."""
    body = {"input": "안녕하세요. 반갑습니다.", "voice": "ryan", "language": "Korean", "response_format": "pcm"}
    with server.client(timeout=TIMEOUT) as http:
        lines = http.post("/v1/audio/speech", json=body | {"stream_format": "sse", "timestamps": True}).text
    events = [json.loads(line[6:]) for line in lines.splitlines() if line.startswith("data: ")]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    timed = [event for event in events if event["type"] == "speech.words"]
    assert pcm_seconds(pcm) > 0.1 and events[-1]["type"] == "speech.audio.done"
    assert timed and all(event["words"] == [] and "korean" in event["error"]["message"].lower() for event in timed)
    assert timed[0]["error"]["param"] == "korean_words"


def test_kokoros_captioned_speech_whole_and_streamed(server):
    with server.client(timeout=TIMEOUT) as http:
        whole = http.post(
            "/dev/captioned_speech", json={"input": TEXT, "voice": "ryan", "stream": False, "subtitles": "vtt"}
        )
        streamed = http.post("/dev/captioned_speech", json={"input": TEXT, "voice": "ryan", "response_format": "wav"})
        refused = http.post("/dev/captioned_speech", json={"input": TEXT, "voice": "ryan", "subtitles": "srt"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "subtitles"
    answer = whole.json()
    cues = answer["subtitles"].split("\n\n")
    assert cues[0] == "WEBVTT" and " ".join(" ".join(cue.splitlines()[1:]) for cue in cues[1:]).strip() == TEXT
    assert whole.headers["content-type"] == "application/json" and answer["audio_format"] == "audio/mpeg"
    seconds = decoded_seconds(base64.b64decode(answer["audio"]))
    assert_timed([(w["word"], w["start_time"], w["end_time"]) for w in answer["timestamps"]], TEXT, seconds)
    lines = [json.loads(line) for line in streamed.text.splitlines()]
    wav = b"".join(base64.b64decode(line["audio"]) for line in lines)
    words = [(w["word"], w["start_time"], w["end_time"]) for line in lines for w in line["timestamps"]]
    assert_timed(words, TEXT, decoded_seconds(wav))


def test_the_speech_websocket_sends_segment_words_offset_across_an_utterance(server):
    async def scenario():
        url = server.base.replace("http://", "ws://") + "/v1/audio/speech/ws"
        async with connect(url) as ws:
            await ws.send(json.dumps({"type": "session.update", "voice": "ryan", "timestamps": True}))
            await ws.send(json.dumps({"type": "input_text", "text": TEXT}))
            messages: list = []

            def count(kind: str) -> int:
                return sum(isinstance(m, dict) and m["type"] == kind for m in messages)

            while not (count("done") and count("segment.words") == count("segment.end")):
                raw = await ws.recv()
                message = raw if isinstance(raw, bytes) else json.loads(raw)
                if isinstance(message, dict):
                    assert message["type"] in SPEECH_SOCKET.sent_by("server"), message
                messages.append(message)
            return messages

    messages = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert messages[0]["session"]["timestamps"] is True
    pcm = b"".join(message for message in messages if isinstance(message, bytes))
    timed = [m for m in messages if isinstance(m, dict) and m["type"] == "segment.words"]
    assert len(timed) > 1 and [m["segment"] for m in timed] == list(range(len(timed)))
    assert all(before["end"] == after["start"] for before, after in zip(timed, timed[1:], strict=False))
    words = [(w["word"], w["start"], w["end"]) for m in timed for w in m["words"]]
    assert_timed(words, TEXT, pcm_seconds(pcm))


@pytest.mark.parametrize("encoding", ["pcm_24000", "mp3_22050_32"])
def test_livekits_elevenlabs_plugin_gets_an_aligned_transcript(server, encoding):
    """LiveKit's plugin, unchanged, over its pooled WebSocket: audio of the rate it asked for, and its timed
    transcript of every word in order, times inside the audio; two streams at once share the socket."""

    async def speak(tts, text: str) -> tuple[float, list]:
        stream = tts.stream()
        stream.push_text(text)
        stream.end_input()
        samples, words, rate = 0, [], 0
        async for event in stream:
            samples, rate = samples + event.frame.samples_per_channel, event.frame.sample_rate
            words += event.frame.userdata.get("lk.timed_transcripts", [])
        await stream.aclose()
        return samples / rate, words

    async def scenario():
        async with livekit_http.open():
            tts = livekit_elevenlabs.TTS(
                base_url=server.base + "/v1", api_key="unused", voice_id="ryan", encoding=encoding
            )
            spoken = await asyncio.gather(speak(tts, TEXT), speak(tts, "One more, please."))
            await tts.aclose()
            return spoken

    for text, (seconds, words) in zip((TEXT, "One more, please."), asyncio.run(scenario()), strict=True):
        assert "".join(str(word) for word in words).split() == text.split()
        as_written = [("".join(spaced_words(str(w))), w.start_time, w.end_time) for w in words]
        assert_timed(as_written, text, seconds)
        # The last word ends where the audio does (none of it lost); bare MP3 frames decode with the encoder's delay
        # and its last frame's padding, at most two frames of 1152 samples.
        assert abs(words[-1].end_time - seconds) < (2 * 1152 / 22050 if encoding.startswith("mp3") else 0.01)


def test_pipecats_elevenlabs_service_gets_word_timestamps(server):
    """Pipecat's service, unchanged, sentence by sentence: every word once and in order, at times that never go
    back and stay inside the audio (times it reads as restarting in each message)."""
    service = ElevenLabsTTSService(
        api_key="unused",
        url=server.base.replace("http://", "ws://"),
        settings=ElevenLabsTTSService.Settings(voice="ryan"),
    )
    timed: list[tuple[str, float]] = []
    report = service.add_word_timestamps

    async def record(word_times, *args, **kwargs):
        timed.extend(word_times)
        return await report(word_times, *args, **kwargs)

    service.add_word_timestamps = record
    collected = Collected((TTSAudioRawFrame, TTSTextFrame, ErrorFrame), TTSStoppedFrame)

    async def scenario():
        async with running(service, collected, audio_out_sample_rate=24000) as pipeline:
            await pipeline.queue_frame(LLMFullResponseStartFrame())
            for sentence in ("Hello there, my friend.", " It costs $5 today!", " Goodbye now."):
                await pipeline.queue_frame(LLMTextFrame(sentence))
            await pipeline.queue_frame(LLMFullResponseEndFrame())

    asyncio.run(scenario())
    assert not [frame for frame in collected.frames if isinstance(frame, ErrorFrame)]
    pcm = b"".join(frame.audio for frame in collected.frames if isinstance(frame, TTSAudioRawFrame))
    assert [word for word, _ in timed] == TEXT.split()
    assert [frame.text for frame in collected.frames if isinstance(frame, TTSTextFrame)] == TEXT.split()
    starts = [start for _, start in timed]
    assert starts == sorted(starts) and starts[0] >= 0.0 and starts[-1] <= pcm_seconds(pcm) + 0.01


def test_the_elevenlabs_socket_speaks_what_it_declares_and_refuses_clearly(server):
    """Raw messages as the plugins send them: an unknown voice is refused before any context (an error, then a
    1008 close); a context that says nothing ends with `isFinal` alone; a bad message is an error naming its
    context, and the context goes on; a socket silent past `inactivity_timeout` with nothing to say is closed."""
    base = server.base.replace("http://", "ws://") + "/v1/text-to-speech/{}/multi-stream-input?output_format=pcm_16000"

    async def scenario():
        async with connect(base.format("nobody"), additional_headers={"xi-api-key": "k"}) as ws:
            refused = json.loads(await ws.recv())
            await ws.wait_closed()
            closed = ws.close_code
        async with connect(base.format("ryan") + "&sync_alignment=true") as ws:
            await ws.send(json.dumps({"text": " ", "context_id": "quiet"}))
            await ws.send(json.dumps({"context_id": "quiet", "close_context": True}))
            await ws.send(json.dumps({"text": 5, "context_id": "a"}))
            await ws.send(json.dumps({"text": "Short one.", "context_id": "a", "flush": True}))
            await ws.send(json.dumps({"context_id": "a", "close_context": True}))
            messages = []
            while not (messages and messages[-1].get("isFinal") and messages[-1]["contextId"] == "a"):
                messages.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"close_socket": True}))
            await ws.wait_closed()
        async with connect(base.format("ryan") + "&inactivity_timeout=0.5") as ws:
            await ws.wait_closed()  # nothing said, nothing to say: closed once the client is silent that long
            idle = ws.close_code
        return refused, closed, messages, idle

    refused, closed, messages, idle = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert idle == 1000
    assert closed == 1008 and "nobody" in refused["message"] and refused["code"] == "invalid_request"
    assert messages[0] == {"isFinal": True, "contextId": "quiet"}
    assert messages[1]["contextId"] == "a" and "`text` must be a string" in messages[1]["error"]
    audio = [m for m in messages if m.get("audio")]
    aligned = [m for m in messages if m.get("alignment")]
    assert audio and aligned and messages.index(aligned[-1]) < len(messages) - 1
    assert all(m["alignment"] == m["normalizedAlignment"] for m in aligned)
    chars = "".join(c for m in aligned for c in m["alignment"]["chars"])
    assert chars == "Short one. "
    seconds = pcm_seconds(b"".join(base64.b64decode(m["audio"]) for m in audio), 16000)
    ends = [
        start + duration
        for m in aligned
        for start, duration in zip(m["alignment"]["charStartTimesMs"], m["alignment"]["charDurationsMs"], strict=True)
    ]
    assert abs(max(ends) / 1000 - seconds) < 0.01  # counted from the context's first audio: up to its end
    kinds = {"isFinal" if m.get("isFinal") else "error" if "error" in m else "alignment" if m.get("alignment")
             else "audio" for m in messages}  # fmt: skip
    assert kinds <= ELEVENLABS_SOCKET.sent_by("server")


def test_elevenlabs_http_speech_streams_the_texts_audio(server):
    """LiveKit's `synthesize()` posts to /stream: its audio in the format asked for, the key in xi-api-key."""
    with httpx.Client(base_url=server.base, timeout=TIMEOUT) as http:
        answer = http.post(
            "/v1/text-to-speech/ryan/stream?output_format=pcm_24000",
            json={"text": "Hello there.", "model_id": "eleven_turbo_v2_5"},
            headers={"xi-api-key": "k"},
        )
        mp3 = http.post("/v1/text-to-speech/ryan", json={"text": "Hello there."})
    assert answer.status_code == 200 and answer.headers["content-type"] == "audio/pcm"
    assert pcm_seconds(answer.content) > 0.1 and np.frombuffer(answer.content, "<i2").any()
    assert mp3.headers["content-type"] == "audio/mpeg" and decoded_seconds(mp3.content) > 0.1
