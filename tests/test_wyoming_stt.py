"""Speech to text over Wyoming, as Home Assistant asks for it, through the wyoming library's own client: a live
server hosting a speech model and a Qwen3-ASR one (tiny random weights) on its Wyoming port. `describe` lists the
recogniser with its languages; `transcribe` and the audio events (44.1 kHz stereo here) give transcript-start, the
text in chunks as decoded, the transcript (the one the transcriber gives offline for the same audio) and
transcript-stop; bad requests are error events and the connection goes on."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import soxr
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info

from qwen3_tts_server.testing.live_server import free_port, live_process
from qwen3_tts_server.testing.signals import voiced_glide
from test_transcription_api import ENV, offline, transcriber  # noqa: F401 (a fixture)
from test_wyoming import read_until

RATE, WIDTH, CHANNELS = 44100, 2, 2


@pytest.fixture(scope="module")
def port(both_families):
    port = free_port()
    asr = ("--model", str(both_families["asr"]), "--wyoming-port", str(port))
    with live_process("serve", both_families["speech"], *asr, env=ENV):
        yield port


@pytest.fixture(scope="module")
def pcm() -> bytes:
    """1.2 s of stereo 16-bit audio, the two channels different."""
    left, right = voiced_glide(1.2, RATE, pitch=150.0), voiced_glide(1.2, RATE, pitch=190.0) * 0.5
    return (np.stack([left, right], axis=1) * 32767).astype("<i2").tobytes()


def utterance(pcm: bytes, **transcribe) -> list[Event]:
    chunks = [pcm[i : i + 4096] for i in range(0, len(pcm), 4096)]
    audio = [AudioChunk(rate=RATE, width=WIDTH, channels=CHANNELS, audio=chunk).event() for chunk in chunks]
    start = AudioStart(rate=RATE, width=WIDTH, channels=CHANNELS).event()
    return [Transcribe(**transcribe).event(), start, *audio, AudioStop().event()]


def converse(port: int, *rounds: tuple[list[Event], str]) -> list[list[Event]]:
    """On one connection: each round's events sent, then its answer read up to its last event type."""

    async def scenario() -> list[list[Event]]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            answers = []
            for events, until in rounds:
                for event in events:
                    await client.write_event(event)
                answers.append(await read_until(client, until))
            return answers

    return asyncio.run(scenario())


def heard_by_the_server(pcm: bytes) -> np.ndarray:
    """What a live session makes of the 4096-byte chunks: each mixed to mono and resampled as it comes."""
    stream = soxr.ResampleStream(RATE, 16000, 1, quality="HQ")
    chunks = [pcm[i : i + 4096] for i in range(0, len(pcm), 4096)]
    mono = [np.frombuffer(chunk, "<i2").reshape(-1, 2).astype(np.float32).mean(axis=1) / 32768 for chunk in chunks]
    pieces = [stream.resample_chunk(piece.astype(np.float32)) for piece in mono]
    return np.concatenate([*pieces, stream.resample_chunk(np.zeros(0, np.float32), last=True)]).astype(np.float32)


def test_describe_lists_the_recogniser_and_a_transcript_streams_in_chunks(port, pcm, transcriber):  # noqa: F811
    """1.2 s, under one 2 s chunk: one pass at audio-stop, the offline transcript of the audio the session heard."""
    (expected,) = transcriber.transcribe([heard_by_the_server(pcm)], ["English"], ["Qwen, Wyoming"])
    described, heard = converse(
        port,
        ([Describe().event()], "info"),
        (
            utterance(pcm, name="asr", language="en_US", transcript_names=["Qwen"], transcript_terms=["Wyoming"]),
            "transcript-stop",
        ),
    )
    (program,) = Info.from_event(described[-1]).asr
    assert program.supports_transcript_streaming and [model.name for model in program.models] == ["asr"]
    assert "en" in program.models[0].languages and "zh" in program.models[0].languages
    kinds = [event.type for event in heard]
    assert kinds[0] == "transcript-start" and kinds[-2:] == ["transcript", "transcript-stop"]
    chunks = [event.data["text"] for event in heard if event.type == "transcript-chunk"]
    final = Transcript.from_event(heard[-2])
    assert chunks and final.text == expected.text and final.language == "en"
    assert "".join(chunks) == final.text  # one pass: its text comes whole


def test_transcript_chunks_come_while_the_audio_still_arrives(port):
    """5 s at 16 kHz mono: after the second 2 s pass its settled text goes out, before the client stops."""
    audio = (voiced_glide(5.0, pitch=130.0) * 32767).astype("<i2").tobytes()
    chunks = [
        AudioChunk(rate=16000, width=2, channels=1, audio=audio[i : i + 3200]).event()
        for i in range(0, len(audio), 3200)
    ]
    opening = [Transcribe(language="en").event(), AudioStart(rate=16000, width=2, channels=1).event(), *chunks]
    early, late = converse(port, (opening, "transcript-chunk"), ([AudioStop().event()], "transcript-stop"))
    assert [event.type for event in early][-2:] == ["transcript-start", "transcript-chunk"]
    assert [event.type for event in late][-2:] == ["transcript", "transcript-stop"] and late[-2].data["text"]


def test_bad_audio_is_an_error_and_the_connection_goes_on(port, pcm):
    stray = AudioChunk(rate=RATE, width=WIDTH, channels=CHANNELS, audio=pcm[:400]).event()
    changed = [Transcribe().event(), AudioStart(rate=RATE, width=WIDTH, channels=CHANNELS).event()]
    changed += [AudioChunk(rate=16000, width=2, channels=1, audio=b"\0" * 64).event(), AudioStop().event()]
    bad_language = Transcribe(language="tlh").event()
    first, second, third, fourth = converse(
        port,
        ([stray], "error"),
        (changed, "error"),
        ([bad_language], "error"),
        (utterance(pcm[: RATE * WIDTH * CHANNELS // 2]), "transcript-stop"),
    )
    assert "outside an utterance" in first[-1].data["text"]
    assert "differs from audio-start" in second[-1].data["text"]
    assert "unsupported language 'tlh'" in third[-1].data["text"] and third[-1].data["code"] == "invalid_request"
    assert [event.type for event in fourth][-2:] == ["transcript", "transcript-stop"]
