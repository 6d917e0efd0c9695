"""Voice activity (audio/voice_activity.py) on real speech: two sentences spoken by espeak-ng (Debian's) with a
pause between them, in a 16 kHz stream fed in uneven pieces. Speech starts before each sentence by about the
prefix padding and stops after it within the silence duration and padding; noise and silence raise nothing."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import soundfile as sf
import soxr

from qwen3_tts_server.audio.voice_activity import SAMPLE_RATE, SpeechEvent, VoiceActivity, VoiceActivitySettings

FRAME_SECONDS = 512 / SAMPLE_RATE


def spoken(text: str, folder) -> np.ndarray:
    path = folder / "spoken.wav"
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    samples, rate = sf.read(path, dtype="float32")
    return soxr.resample(samples, rate, SAMPLE_RATE).astype(np.float32)


def audible(wave: np.ndarray) -> tuple[float, float]:
    """Seconds of the first and last sample above a whisper."""
    loud = np.nonzero(np.abs(wave) > 0.01)[0]
    return loud[0] / SAMPLE_RATE, loud[-1] / SAMPLE_RATE


@pytest.fixture(scope="module")
def conversation(tmp_path_factory) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """0.5 s of silence, a sentence, 1.2 s of silence, another, 1.2 s of silence; and where each is audible."""
    folder = tmp_path_factory.mktemp("espeak")
    first = spoken("Hello there, this is a test of the speech detector.", folder)
    second = spoken("How are you today?", folder)
    pieces = [np.zeros(SAMPLE_RATE // 2, np.float32), first, np.zeros(int(1.2 * SAMPLE_RATE), np.float32), second]
    pieces.append(np.zeros(int(1.2 * SAMPLE_RATE), np.float32))
    spans, offset = [], 0
    for piece in pieces:
        if piece.any():
            start, end = audible(piece)
            spans.append((offset / SAMPLE_RATE + start, offset / SAMPLE_RATE + end))
        offset += len(piece)
    return np.concatenate(pieces), spans


def detected(wave: np.ndarray, piece: int, settings: VoiceActivitySettings | None = None) -> list[SpeechEvent]:
    activity = VoiceActivity(settings)
    return [event for start in range(0, len(wave), piece) for event in activity.feed(wave[start : start + piece])]


def test_each_sentence_starts_and_stops_speech(conversation):
    wave, spans = conversation
    settings = VoiceActivitySettings()
    events = detected(wave, 700)
    assert [event.kind for event in events] == ["started", "stopped"] * 2
    pad, silence = settings.prefix_padding_ms / 1000, settings.silence_duration_ms / 1000
    for (start, end), (began, ended) in zip(spans, zip(events[::2], events[1::2], strict=True), strict=True):
        assert start - pad - 2 * FRAME_SECONDS <= began.sample / SAMPLE_RATE <= start + 0.15
        assert end <= ended.sample / SAMPLE_RATE <= end + silence + pad + 2 * FRAME_SECONDS
    assert detected(wave, 16000) == events  # the frames are the stream's, whatever sizes it arrives in


def test_a_longer_prefix_padding_starts_speech_earlier(conversation):
    wave, _ = conversation
    short = detected(wave, 4096, VoiceActivitySettings(prefix_padding_ms=100))
    long = detected(wave, 4096, VoiceActivitySettings(prefix_padding_ms=400))
    assert short[0].sample - long[0].sample == 300 * SAMPLE_RATE // 1000


def test_noise_and_silence_raise_nothing():
    noise = (np.random.default_rng(0).standard_normal(3 * SAMPLE_RATE) * 0.05).astype(np.float32)
    assert detected(noise, 1000) == [] and detected(np.zeros(3 * SAMPLE_RATE, np.float32), 1000) == []


def test_streams_fed_in_turn_each_hear_what_they_hear_alone(conversation):
    """Every detector keeps its own recurrent state: two fed alternately, piece by piece, find the events each finds
    alone (sessions run side by side)."""
    wave, _ = conversation
    later = np.concatenate([np.zeros(SAMPLE_RATE, np.float32), wave[: len(wave) // 2]])  # a second on
    first, second = VoiceActivity(), VoiceActivity()
    found: tuple[list[SpeechEvent], list[SpeechEvent]] = ([], [])
    for start in range(0, len(wave), 4096):
        found[0].extend(first.feed(wave[start : start + 4096]))
        found[1].extend(second.feed(later[start : start + 4096]))
    assert found == (detected(wave, 4096), detected(later, 4096)) and found[0] != found[1]
