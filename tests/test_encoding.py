"""Response encoding: every format streams bytes before the end and decodes back to the same sound."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from qwen3_tts_server.audio.encoding import FORMATS, StreamEncoder, audio_format
from qwen3_tts_server.errors import InvalidInputError

SOURCE_RATE = 24000  # the test model's


def encoder_for(name: str, sample_rate: int | None = None) -> StreamEncoder:
    return StreamEncoder(*audio_format(name, sample_rate, SOURCE_RATE), SOURCE_RATE)


RATE = 24000
SECONDS = 2.0


def sine(seconds: float = SECONDS, rate: int = RATE, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.4 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def encode_in_frames(name: str, audio: np.ndarray, sample_rate: int | None = None) -> list[bytes]:
    encoder = encoder_for(name, sample_rate)
    parts = [encoder.write(audio[i : i + 1920]) for i in range(0, len(audio), 1920)]
    return [*parts, encoder.close()]


def decode(data: bytes, raw_codec: str | None = None, rate: int = RATE) -> tuple[np.ndarray, int]:
    if raw_codec is not None:
        context = av.CodecContext.create(raw_codec, "r")
        context.sample_rate, context.layout = rate, "mono"
        frames = context.decode(av.Packet(data))
    else:
        with av.open(io.BytesIO(data)) as container:
            frames = list(container.decode(container.streams.audio[0]))
    rate = frames[0].sample_rate
    samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.float32)
    if frames[0].format.name.startswith("s16"):
        samples /= 32768.0
    return samples, rate


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[spectrum.argmax()])


@pytest.mark.parametrize("name", ["mp3", "opus", "ogg", "aac", "flac", "wav"])
def test_containers_stream_and_decode_back(name):
    parts = encode_in_frames(name, sine())
    assert sum(len(p) for p in parts[:10]) > 0, "bytes must flow before the stream ends"
    samples, rate = decode(b"".join(parts))
    assert abs(len(samples) / rate - SECONDS) < 0.1
    assert abs(dominant_frequency(samples, rate) - 440) < 5


@pytest.mark.parametrize("name", ["opus", "ogg"])
def test_ogg_is_opus_in_ogg_under_the_earlier_servers_name(name):
    with av.open(io.BytesIO(b"".join(encode_in_frames(name, sine())))) as container:
        stream = container.streams.audio[0]
        assert (container.format.name, stream.codec_context.name, stream.sample_rate) == ("ogg", "opus", 48000)


def test_lossless_formats_are_exact_16_bit():
    audio = sine()
    expected = np.round(audio * 32767).astype(np.int16)
    raw = np.frombuffer(b"".join(encode_in_frames("pcm", audio)), dtype="<i2")
    np.testing.assert_array_equal(raw, expected)
    for name in ("wav", "flac"):
        samples, _ = decode(b"".join(encode_in_frames(name, audio)))
        np.testing.assert_array_equal(np.round(samples * 32768).astype(np.int16), expected)


@pytest.mark.parametrize(("name", "codec"), [("mulaw", "pcm_mulaw"), ("alaw", "pcm_alaw")])
def test_telephony_formats_are_8khz_g711(name, codec):
    data = b"".join(encode_in_frames(name, sine(freq=1000.0)))
    assert len(data) == int(SECONDS * 8000)  # one byte per sample
    samples, rate = decode(data, raw_codec=codec, rate=8000)
    assert rate == 8000 and abs(dominant_frequency(samples, rate) - 1000) < 5


def test_sample_rate_override_resamples():
    samples, rate = decode(b"".join(encode_in_frames("wav", sine(), sample_rate=16000)))
    assert rate == 16000 and abs(len(samples) - 32000) <= 1
    assert abs(dominant_frequency(samples, rate) - 440) < 5


def test_media_types():
    assert {name: encoder_for(name).media_type for name in FORMATS} == {
        "mp3": "audio/mpeg",
        "opus": "audio/ogg",
        "ogg": "audio/ogg",
        "aac": "audio/aac",
        "flac": "audio/flac",
        "wav": "audio/wav",
        "pcm": "audio/pcm",
        "mulaw": "audio/basic",
        "alaw": "audio/x-alaw-basic",
    }


@pytest.mark.parametrize(
    ("name", "rate", "message"),
    [
        ("wma", None, "unsupported response_format"),
        ("ogg", 44100, "ogg cannot be sent at 44100 Hz"),
        ("opus", 44100, "opus cannot be sent at 44100 Hz"),
        ("wav", 96000, "8000 to 48000"),
    ],
)
def test_bad_format_or_rate(name, rate, message):
    with pytest.raises(InvalidInputError, match=message):
        encoder_for(name, rate)


@pytest.mark.parametrize("speed", [0.25, 0.5, 1.5, 2.0, 4.0])
def test_tempo_keeps_pitch_and_scales_duration(speed):
    from qwen3_tts_server.audio.tempo import Tempo

    tempo = Tempo(speed, SOURCE_RATE)
    audio = sine(seconds=4.0)
    out = np.concatenate([tempo.process(audio[i : i + 1920]) for i in range(0, len(audio), 1920)] + [tempo.flush()])
    assert abs(len(out) / RATE - 4.0 / speed) < 0.05 * 4.0 / speed + 0.02
    assert abs(dominant_frequency(out, RATE) - 440) < 5
