"""Reference audio intake: every common format decodes to 24 kHz mono, bad input is refused clearly."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from audio_files import encode_with_pyav
from qwen3_tts_server.audio.reference import MAX_SECONDS, SAMPLE_RATE, load_reference
from qwen3_tts_server.errors import InvalidInputError, UnsupportedMediaError


def tone(seconds: float, rate: int = 24000, channels: int = 1, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    mono = amplitude * np.sin(2 * np.pi * 220 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return np.stack([mono * (1 - 0.5 * c) for c in range(channels)], axis=1).astype(np.float32)


def wav_bytes(data: np.ndarray, rate: int, subtype: str = "PCM_16") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, data, rate, format="WAV", subtype=subtype)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("container", "codec", "rate"),
    [
        ("mp3", "libmp3lame", 44100),
        ("ogg", "libopus", 48000),
        ("mp4", "aac", 44100),
        ("webm", "libopus", 48000),
        ("flac", "flac", 22050),
        ("wav", "pcm_s16le", 16000),
    ],
)
def test_common_formats_decode_to_24khz_mono(container, codec, rate):
    reference = load_reference(encode_with_pyav(tone(2.0, rate, channels=2), rate, container, codec))
    assert reference.source_rate == rate and reference.source_channels == 2
    assert reference.samples.dtype == np.float32 and reference.samples.ndim == 1
    assert abs(reference.seconds - 2.0) < 0.1  # encoder priming and padding only
    assert 0.05 < np.sqrt(np.mean(reference.samples**2)) < 0.5


def test_stereo_is_averaged_and_24khz_input_kept_as_is():
    data = tone(1.5, channels=2)
    reference = load_reference(wav_bytes(data, 24000, "FLOAT"))
    np.testing.assert_array_equal(reference.samples, data.mean(axis=1, dtype=np.float32))


def test_tail_silence_is_appended_only_when_asked():
    data = wav_bytes(tone(1.5), 24000)
    plain = load_reference(data)
    padded = load_reference(data, tail_silence_ms=250)
    assert len(padded.samples) == len(plain.samples) + SAMPLE_RATE // 4
    assert not padded.samples[len(plain.samples) :].any()
    np.testing.assert_array_equal(padded.samples[: len(plain.samples)], plain.samples)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (wav_bytes(np.zeros((24000 * 3, 1), np.float32), 24000), "silent"),
        (wav_bytes(tone(0.5), 24000), "only 0.50 s"),
        (wav_bytes(tone(MAX_SECONDS + 1, rate=8000), 8000), "the limit is 30 s"),
    ],
)
def test_bad_references_are_refused(data, message):
    with pytest.raises(InvalidInputError, match=message):
        load_reference(data)


def test_bytes_that_are_not_audio_are_unsupported_media():
    with pytest.raises(UnsupportedMediaError, match="not audio in a format") as caught:
        load_reference(b"definitely not audio, just some text bytes" * 10)
    assert caught.value.status == 400 and caught.value.param == "audio"


@pytest.mark.parametrize("container", ["wav", "flac"])
def test_truncated_file_is_refused(container):
    data = wav_bytes(tone(4.0), 24000) if container == "wav" else encode_with_pyav(tone(4.0), 24000, "flac", "flac")
    with pytest.raises(InvalidInputError, match="truncated"):
        load_reference(data[: len(data) // 2])


def test_negative_tail_silence_is_refused():
    with pytest.raises(InvalidInputError, match="reference_tail_silence_ms"):
        load_reference(wav_bytes(tone(1.5), 24000), tail_silence_ms=-1)
