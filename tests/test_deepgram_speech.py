"""Deepgram's speech protocol on a live server hosting a tiny speech model, its key required: the plugins themselves,
unchanged, with their base URL set to the server (livekit-plugins-deepgram 1.8.9 `tts.py`: `synthesize()` posts to
/v1/speak, `stream()` speaks a word a `Speak` and ends each segment on `Flushed`; pipecat-ai 1.14.0
`services/deepgram/tts.py`: `DeepgramTTSService` over the socket, `DeepgramHttpTTSService` over HTTP), then raw
messages and requests as they send them. Audio is checked decoded: its rate, its length, not silence."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator

import aiohttp
import httpx
import numpy as np
import pytest
import soundfile as sf
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import deepgram as livekit_deepgram
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from websockets.asyncio.client import connect

from pipecat_pipeline import Collected, running
from qwen3_tts_server.service.speech.deepgram import DEEPGRAM_SPEAK_SOCKET, voice_of
from qwen3_tts_server.testing.live_server import LiveProcess, live_process

KEY = "dg-test-key"
ENV = {"MAX_REQUEST_FRAMES": "20", "TEXT_NORMALIZE": "false", "IDLE_TIMEOUT": "0", "API_KEY": KEY}
TOKEN = {"Authorization": f"Token {KEY}"}
TEXT = "Hello there, how can I help?"
TIMEOUT = 300  # a guard against a hang, not a speed limit


@pytest.fixture(scope="module")
def server(both_families) -> Iterator[LiveProcess]:
    with live_process("serve", both_families["speech"], "--preload-model", env=ENV) as live:
        yield live


def assert_speech(pcm: bytes, rate: int) -> None:
    """16-bit speech at `rate`: long enough for a few words, not silence."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    assert 0.2 < len(samples) / rate < 30
    assert np.sqrt(np.mean(samples**2)) > 1e-3


def socket_url(server: LiveProcess, query: str = "model=ryan&encoding=linear16&sample_rate=24000") -> str:
    return server.base.replace("http://", "ws://") + "/v1/speak?" + query


def test_livekits_deepgram_synthesize_posts_and_gets_pcm(server):
    async def scenario():
        async with livekit_http.open():
            tts = livekit_deepgram.TTS(model="ryan", api_key=KEY, base_url=server.base + "/v1/speak")
            frames = [audio.frame async for audio in tts.synthesize(TEXT)]
            await tts.aclose()
            return frames

    frames = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert {(frame.sample_rate, frame.num_channels) for frame in frames} == {(24000, 1)}
    assert_speech(b"".join(bytes(frame.data) for frame in frames), 24000)


def test_livekits_deepgram_streams_speak_one_after_another_over_one_socket(server):
    """Two streams, one after the other, as an agent speaks two replies: each a word a `Speak`, then `Flush`, ended
    on its `Flushed`; the second reuses the first's pooled socket; closing the plugin sends `Flush` and `Close`."""

    async def scenario():
        async with livekit_http.open():
            tts = livekit_deepgram.TTS(model="aura-2-thalia-en", api_key=KEY, base_url=server.base + "/v1/speak")
            replies = []
            for text in ("Hello there.", "Goodbye now, see you soon."):
                stream = tts.stream()
                stream.push_text(text)
                stream.end_input()
                events = [event async for event in stream]
                replies.append((events, stream._connection_reused))
                await stream.aclose()
            await tts.aclose()
            return replies

    replies = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert [reused for _, reused in replies] == [False, True]
    for events, _ in replies:
        assert {(event.frame.sample_rate, event.frame.num_channels) for event in events} == {(24000, 1)}
        assert_speech(b"".join(bytes(event.frame.data) for event in events), 24000)


def test_pipecats_deepgram_services_speak_over_the_socket_and_http(server):
    async def spoken(service) -> list:
        collected = Collected((TTSAudioRawFrame, TTSStoppedFrame, ErrorFrame), until=TTSStoppedFrame)
        async with running(service, collected) as worker:
            await worker.queue_frame(TTSSpeakFrame(TEXT))
        return collected.frames

    # Pipecat ends an audio context that stays silent for `stop_frame_timeout_s` (3 s): the suite's parallel workers
    # can hold a tiny model's first audio past that on two cores.
    quiet = {"stop_frame_timeout_s": 60.0}

    async def scenario():
        voice = DeepgramTTSService.Settings(voice="ryan")
        url = server.base.replace("http://", "ws://")
        socket = DeepgramTTSService(api_key=KEY, base_url=url, settings=voice, **quiet)
        async with aiohttp.ClientSession() as session:
            voice = DeepgramHttpTTSService.Settings(voice="ryan")
            http = DeepgramHttpTTSService(
                api_key=KEY, aiohttp_session=session, base_url=server.base, settings=voice, **quiet
            )
            return await spoken(socket), await spoken(http)

    for frames in asyncio.run(asyncio.wait_for(scenario(), TIMEOUT)):
        assert not [frame for frame in frames if isinstance(frame, ErrorFrame)], frames
        audio = [frame for frame in frames if isinstance(frame, TTSAudioRawFrame)]
        assert {(frame.sample_rate, frame.num_channels) for frame in audio} == {(24000, 1)}
        assert_speech(b"".join(frame.audio for frame in audio), 24000)


def test_the_socket_answers_every_flush_in_order_and_says_only_what_it_declares(server):
    """Raw messages as the plugins send them: `Metadata` first; each flush's audio, then its `Flushed` (a flush with
    nothing held too, after the audio before it); a bad message is an `Error` and the socket goes on; `Clear` is
    answered `Cleared`; `Close` speaks the text held (its audio, then its `Flushed`), then the server closes the
    socket."""

    async def scenario():
        messages: list = []
        async with connect(socket_url(server), additional_headers=TOKEN) as ws:
            messages.append(json.loads(await ws.recv()))
            for word in ("Hello ", "there. "):
                await ws.send(json.dumps({"type": "Speak", "text": word}))
            await ws.send(json.dumps({"type": "Flush"}))
            await ws.send(json.dumps({"type": "Flush"}))
            await ws.send(json.dumps({"type": "Speak", "text": 5}))
            await ws.send(json.dumps({"type": "Shout"}))
            await ws.send(json.dumps({"type": "KeepAlive"}))  # taken silently
            await ws.send(b"\x00\x01")
            while sum(m.get("type") == "Flushed" for m in messages if isinstance(m, dict)) < 2:
                message = await ws.recv()
                messages.append(message if isinstance(message, bytes) else json.loads(message))
            await ws.send(json.dumps({"type": "Clear"}))
            messages.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"type": "Speak", "text": "Goodbye now."}))
            await ws.send(json.dumps({"type": "Close"}))
            async for message in ws:
                messages.append(message if isinstance(message, bytes) else json.loads(message))
            return messages, ws.close_code

    messages, code = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert code == 1000
    first, *rest = messages
    assert first["type"] == "Metadata" and first["model_name"] == "ryan" and first["request_id"]
    kinds = ["audio" if isinstance(m, bytes) else m["type"] for m in rest]
    assert set(kinds) <= DEEPGRAM_SPEAK_SOCKET.sent_by("server")
    flushed = [m for m in rest if isinstance(m, dict) and m["type"] == "Flushed"]
    assert [m["sequence_id"] for m in flushed] == [0, 1, 2] and kinds[-1] == "Flushed"
    first_flushed = kinds.index("Flushed")
    first_audio = b"".join(m for m in rest[:first_flushed] if isinstance(m, bytes))
    assert kinds[first_flushed + 1] != "audio"  # the empty flush's audio: none, its Flushed after the first's
    errors = [m for m in rest if isinstance(m, dict) and m["type"] == "Error"]
    assert len(errors) == 3 and all(m["err_code"] == "invalid_request" and m["err_msg"] for m in errors)
    assert "Shout" in errors[1]["err_msg"] and "binary messages" in errors[2]["err_msg"]
    cleared = kinds.index("Cleared")
    assert rest[cleared] == {"type": "Cleared", "sequence_id": 0}
    closing_audio = b"".join(m for m in rest[cleared:] if isinstance(m, bytes))  # what was held at Close
    # The random-weight model may end a text by itself after its first frames (its EOS row is louder, and this
    # socket takes no seed; a CI run once heard "Hello there." end after two frames): each flush has audio of its
    # own, and the two together are speech.
    for audio in (first_audio, closing_audio):
        assert audio and len(audio) % 2 == 0 and np.abs(np.frombuffer(audio, "<i2")).max() > 0
    assert_speech(first_audio + closing_audio, 24000)


def test_the_socket_speaks_mulaw_at_8khz_and_refuses_a_bad_query_or_key(server):
    async def scenario():
        async with connect(
            socket_url(server, "model=ryan&encoding=mulaw&sample_rate=8000"), additional_headers=TOKEN
        ) as ws:
            await ws.recv()  # Metadata
            await ws.send(json.dumps({"type": "Speak", "text": TEXT}))
            await ws.send(json.dumps({"type": "Flush"}))
            audio = b""
            while isinstance(message := await ws.recv(), bytes):
                audio += message
            flushed = json.loads(message)
        refusals = []
        for query in ("model=ryan&encoding=opus", "model=nobody", "model=ryan&sample_rate=fast"):
            async with connect(socket_url(server, query), additional_headers=TOKEN) as ws:
                refusals.append((json.loads(await ws.recv()), await ws.wait_closed(), ws.close_code))
        async with connect(socket_url(server), additional_headers={"Authorization": "Token wrong"}) as ws:
            await ws.wait_closed()
            wrong_key = ws.close_code
        return audio, flushed, refusals, wrong_key

    audio, flushed, refusals, wrong_key = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert flushed == {"type": "Flushed", "sequence_id": 0}
    samples = np.frombuffer(audio, np.uint8)  # one mu-law byte a sample
    assert 0.2 < len(samples) / 8000 < 30 and len(set(samples.tolist())) > 16
    for (error, _, code), named in zip(refusals, ("opus", "nobody", "sample_rate"), strict=True):
        assert error["type"] == "Error" and named in error["err_msg"] and code == 1008
    assert wrong_key == 1008


def test_http_speech_in_each_encoding_and_container(server):
    with httpx.Client(base_url=server.base, timeout=TIMEOUT, headers=TOKEN) as http:

        def speak(query: str, text: str = TEXT) -> httpx.Response:
            return http.post(f"/v1/speak?{query}", json={"text": text})

        bare = speak("model=ryan&encoding=linear16&sample_rate=16000&container=none")
        wav = speak("model=aura-2-thalia-en")  # Deepgram's defaults: linear16 in a WAV at 24 kHz
        mp3 = speak("model=ryan&encoding=mp3")
        refused = [speak("encoding=mulaw&container=wav"), speak("encoding=speex"), speak("speed=3"), speak("", "")]
        unkeyed = httpx.post(f"{server.base}/v1/speak", json={"text": TEXT}, headers={"Authorization": "Token no"})
    assert bare.status_code == 200 and bare.headers["dg-model-name"] == "ryan"
    assert_speech(bare.content, 16000)
    samples, rate = sf.read(io.BytesIO(wav.content), dtype="int16")
    assert rate == 24000
    assert_speech(samples.tobytes(), 24000)
    assert mp3.headers["content-type"] == "audio/mpeg" and len(mp3.content) > 1000
    assert [answer.status_code for answer in refused] == [400, 400, 400, 400]
    assert all(answer.json()["error"]["message"] for answer in refused)
    assert "container" in refused[0].json()["error"]["message"] and "speex" in refused[1].json()["error"]["message"]
    assert unkeyed.status_code == 401


def test_a_deepgram_voice_name_is_the_servers_default_voice_in_its_language():
    """No voice named: the service speaks DEFAULT_VOICE, whatever the server sets it to."""
    assert voice_of("aura-2-thalia-en") == {"voice": None, "language": "english"}
    assert voice_of("aura-2-celeste-es") == {"voice": None, "language": "spanish"}
    assert voice_of("aura-asteria-xx") == {"voice": None}  # a code we do not speak: the language is detected
    assert voice_of("ryan") == {"voice": "ryan"}
