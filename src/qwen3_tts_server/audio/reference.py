"""Reference audio intake for voice cloning: any common container/codec -> 24 kHz mono float32.

The samples match what the official package feeds its encoders for the same file: channels averaged
in float32 (librosa's `to_mono`), then resampled with soxr at "HQ" quality (librosa's default
`soxr_hq`). Nothing else is done unless asked: an optional stretch of trailing silence can be added
(`tail_silence_ms`), which users of peer servers found stops in-context clones from repeating the
reference's last phoneme at the start of the new speech.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import av
import numpy as np
import soxr

from ..errors import InvalidInputError, UnsupportedMediaError

SAMPLE_RATE = 24000
MIN_VOICED_SECONDS = 1.0
MAX_SECONDS = 30.0
# A 20 ms window counts as voiced above -50 dBFS RMS.
VOICED_WINDOW_SECONDS = 0.02
VOICED_RMS = 10 ** (-50 / 20)
# A container that declares a duration but decodes to less than this share of it was cut short.
TRUNCATION_TOLERANCE = 0.05


@dataclass(frozen=True)
class ReferenceAudio:
    """A decoded reference: 24 kHz mono float32 samples, with where they came from."""

    samples: np.ndarray
    source_rate: int
    source_channels: int
    sha256: str  # of the bytes as received

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def _to_float(frame_array: np.ndarray, sample_format: str) -> np.ndarray:
    """PyAV frame samples -> float32 in [-1, 1], scaled as libsndfile scales them."""
    base = sample_format.rstrip("p")
    if base == "s16":
        return frame_array.astype(np.float32) / np.float32(32768.0)
    if base == "s32":
        return frame_array.astype(np.float32) / np.float32(2147483648.0)
    if base == "u8":
        return (frame_array.astype(np.float32) - np.float32(128.0)) / np.float32(128.0)
    if base in ("flt", "dbl"):
        return frame_array.astype(np.float32)
    raise InvalidInputError(f"unsupported sample format {sample_format!r} in the reference audio", param="audio")


def _check_wav_complete(data: bytes) -> None:
    """WAV decoders trust the bytes present, so compare the data chunk's declared size with what arrived."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return
    offset = 12
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], int.from_bytes(data[offset + 4 : offset + 8], "little")
        if chunk == b"data":
            present = len(data) - offset - 8
            if size != 0xFFFFFFFF and present < size:  # 0xFFFFFFFF: written as a stream, size unknown
                raise InvalidInputError(
                    f"the reference WAV is truncated: its header declares {size} bytes of audio, {present} arrived",
                    param="audio",
                )
            return
        offset += 8 + size + (size & 1)


def decode_audio(data: bytes) -> tuple[np.ndarray, int]:
    """Decode audio bytes (wav, flac, mp3, ogg/opus, m4a/aac, webm, ...) -> (channels, samples) float32, rate."""
    if not data:
        raise InvalidInputError("the reference audio is empty", param="audio")
    _check_wav_complete(data)
    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.error.FFmpegError, ValueError, UnicodeDecodeError) as exc:
        raise UnsupportedMediaError(
            f"the reference is not audio in a format this server reads (wav, flac, mp3, ogg, m4a, webm, ...): {exc}",
            param="audio",
        ) from None
    with container:
        if not container.streams.audio:
            raise UnsupportedMediaError("the reference file holds no audio stream", param="audio")
        stream = container.streams.audio[0]
        declared = float(container.duration) / av.time_base if container.duration else None
        chunks = []
        try:
            for frame in container.decode(stream):
                array = frame.to_ndarray()
                channels = len(frame.layout.channels)
                if not frame.format.is_planar:  # packed: (1, samples * channels)
                    array = array.reshape(-1, channels).T
                chunks.append(_to_float(array, frame.format.name))
                rate = frame.sample_rate
        except (av.error.FFmpegError, ValueError) as exc:
            raise InvalidInputError(
                f"the reference could not be decoded as audio; it may be truncated or corrupt ({exc})", param="audio"
            ) from None
    if not chunks:
        raise InvalidInputError("the reference audio decodes to no samples", param="audio")
    audio = np.concatenate(chunks, axis=1)
    decoded = audio.shape[1] / rate
    if declared is not None and decoded < declared * (1 - TRUNCATION_TOLERANCE) - 0.05:
        raise InvalidInputError(
            f"the reference audio looks truncated: its header declares {declared:.2f} s but only "
            f"{decoded:.2f} s could be decoded",
            param="audio",
        )
    return audio, rate


def _resample(samples: np.ndarray, rate: int) -> np.ndarray:
    """soxr HQ to 24 kHz, then padded/trimmed to ceil(n * ratio) samples exactly as librosa.resample does."""
    out = soxr.resample(samples, rate, SAMPLE_RATE, quality="HQ")
    length = int(np.ceil(len(samples) * (float(SAMPLE_RATE) / rate)))  # librosa rounds this way, float error included
    if len(out) < length:
        return np.concatenate([out, np.zeros(length - len(out), dtype=out.dtype)])
    return out[:length]


def voiced_seconds(samples: np.ndarray, rate: int) -> float:
    window = max(1, int(rate * VOICED_WINDOW_SECONDS))
    usable = len(samples) // window * window
    if usable == 0:
        return 0.0
    rms = np.sqrt(np.mean(samples[:usable].reshape(-1, window).astype(np.float64) ** 2, axis=1))
    return float(np.count_nonzero(rms > VOICED_RMS)) * window / rate


def load_reference(data: bytes, tail_silence_ms: int = 0) -> ReferenceAudio:
    """Validate and convert reference audio bytes to 24 kHz mono; see the module docstring."""
    if tail_silence_ms < 0:
        raise InvalidInputError("reference_tail_silence_ms must be >= 0", param="reference_tail_silence_ms")
    audio, rate = decode_audio(data)
    seconds = audio.shape[1] / rate
    if seconds > MAX_SECONDS:
        raise InvalidInputError(
            f"the reference audio is {seconds:.1f} s long; the limit is {MAX_SECONDS:.0f} s (trim it to the "
            "part you want cloned)",
            param="audio",
        )
    mono = np.mean(audio, axis=0) if audio.shape[0] > 1 else audio[0]
    voiced = voiced_seconds(mono, rate)
    if voiced < MIN_VOICED_SECONDS:
        what = "silent" if voiced == 0 else f"only {voiced:.2f} s of non-silent sound"
        raise InvalidInputError(
            f"the reference audio is {what}; at least {MIN_VOICED_SECONDS:.0f} s of speech is needed", param="audio"
        )
    if rate != SAMPLE_RATE:
        mono = _resample(mono, rate)
    mono = np.ascontiguousarray(mono, dtype=np.float32)
    if tail_silence_ms:
        mono = np.concatenate([mono, np.zeros(SAMPLE_RATE * tail_silence_ms // 1000, dtype=np.float32)])
    return ReferenceAudio(
        samples=mono, source_rate=rate, source_channels=audio.shape[0], sha256=hashlib.sha256(data).hexdigest()
    )
