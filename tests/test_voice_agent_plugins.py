"""The voice agents' own OpenAI plugins against a live server hosting a tiny speech model and a tiny transcriber:
LiveKit's `openai.TTS` and `openai.STT.recognize()` (livekit-plugins-openai 1.8.9), Pipecat's `OpenAITTSService`
and `OpenAISTTService` (1.14.0), each run as an agent runs it. Speech comes back as the 24 kHz PCM the plugins
expect; each transcript is the one the transcriber gives offline for the audio the plugin sent. (Their realtime
transcription streams: tests/test_realtime_transcription.py.)"""

from __future__ import annotations

import asyncio
import io

import numpy as np
import soundfile as sf
from livekit import rtc
from livekit.agents.utils import http_context as livekit_http
from livekit.plugins import openai as livekit_openai
from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.services.openai.stt import OpenAISTTService
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.transcriptions.language import Language

from pipecat_pipeline import Collected, running
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import offline, server, transcriber  # noqa: F401 (fixtures)

TEXT = "Hello there, how can I help?"


def pcm16(seconds: float, rate: int, pitch: float) -> np.ndarray:
    return (voiced_glide(seconds, rate, pitch=pitch) * 32767).astype("<i2")


def wav(samples: np.ndarray, rate: int) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def assert_speech(pcm: bytes, rate: int) -> None:
    """Speech at 24 kHz: long enough for the text, not silence."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    assert rate == 24000 and 0.3 < len(samples) / rate < 30
    assert np.sqrt(np.mean(samples**2)) > 1e-3


def test_livekits_openai_tts_speaks_pcm(server):  # noqa: F811
    async def scenario():
        async with livekit_http.open():
            tts = livekit_openai.TTS(
                base_url=server.base + "/v1", api_key="unused", model="tts-1", voice="nova", response_format="pcm"
            )
            frames = [audio.frame async for audio in tts.synthesize(TEXT)]
            await tts.aclose()
            return frames

    frames = asyncio.run(scenario())
    assert {(frame.sample_rate, frame.num_channels) for frame in frames} == {(24000, 1)}
    assert_speech(b"".join(bytes(frame.data) for frame in frames), 24000)


def test_livekits_openai_stt_recognize_gets_the_transcript(server, transcriber):  # noqa: F811
    """`recognize()` uploads the frames as one WAV at their rate; whisper-1 asks for verbose_json and reports the
    language the answer gives; a temperature samples."""
    samples = pcm16(1.0, 24000, 150.0)
    frames = [rtc.AudioFrame(samples[i : i + 2400].tobytes(), 24000, 1, 2400) for i in range(0, len(samples), 2400)]

    async def scenario():
        async with livekit_http.open():
            detecting = livekit_openai.STT(
                base_url=server.base + "/v1", api_key="unused", model="gpt-4o-mini-transcribe", detect_language=True
            )
            whisper = livekit_openai.STT(base_url=server.base + "/v1", api_key="unused", model="whisper-1")
            sampling = livekit_openai.STT(base_url=server.base + "/v1", api_key="unused", temperature=0.7)
            return [await stt.recognize(frames) for stt in (detecting, whisper, sampling)]

    detected, english, sampled = asyncio.run(scenario())
    assert detected.alternatives[0].text == offline(transcriber, wav(samples, 24000)).text
    assert english.alternatives[0].text == offline(transcriber, wav(samples, 24000), "English").text
    assert english.alternatives[0].language == "en"  # the answer's "english", as LiveKit normalises it
    assert sampled.alternatives[0].text != english.alternatives[0].text  # sampled, not greedy


def test_pipecats_openai_tts_service_speaks_pcm(server):  # noqa: F811
    service = OpenAITTSService(
        api_key="unused", base_url=server.base + "/v1", settings=OpenAITTSService.Settings(model="tts-1", voice="nova")
    )
    collected = Collected((TTSAudioRawFrame, ErrorFrame), TTSStoppedFrame)

    async def scenario():
        async with running(service, collected, audio_out_sample_rate=24000) as pipeline:
            await pipeline.queue_frame(TTSSpeakFrame(TEXT))

    asyncio.run(scenario())
    assert collected.frames and all(isinstance(frame, TTSAudioRawFrame) for frame in collected.frames)
    assert_speech(b"".join(frame.audio for frame in collected.frames), collected.frames[0].sample_rate)


def test_pipecats_openai_stt_service_gets_the_transcript(server, transcriber):  # noqa: F811
    """The segmented service uploads what its pipeline's VAD cut, with half a second of silence after it, as a WAV
    at the pipeline's rate; with `include_prob_metrics` it asks for each token's log probability."""
    samples = pcm16(1.5, 16000, 170.0)
    service = OpenAISTTService(
        api_key="unused",
        base_url=server.base + "/v1",
        settings=OpenAISTTService.Settings(model="gpt-4o-transcribe", language=Language.EN),
        include_prob_metrics=True,
    )
    audio = [InputAudioRawFrame(samples[i : i + 1600].tobytes(), 16000, 1) for i in range(0, len(samples), 1600)]
    collected = Collected((TranscriptionFrame, ErrorFrame), TranscriptionFrame)

    async def scenario():
        async with running(service, collected, audio_in_sample_rate=16000) as pipeline:
            await pipeline.queue_frames([VADUserStartedSpeakingFrame(), *audio, VADUserStoppedSpeakingFrame()])

    asyncio.run(scenario())
    sent = np.concatenate([samples, np.zeros(8000, "<i2")])
    expected = offline(transcriber, wav(sent, 16000), "English")
    (final,) = collected.frames
    assert isinstance(final, TranscriptionFrame) and final.text == expected.text
    stop = transcriber.model.tokens.stop
    assert len(final.result.logprobs) == len([token for token in expected.part_tokens[0] if token not in stop]) > 0
