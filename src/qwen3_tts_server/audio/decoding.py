"""Audio bytes in any common container and codec (wav, flac, mp3, ogg/opus, m4a/aac, webm, mu-law and A-law WAV,
...) decoded by PyAV to float32 samples scaled as libsndfile scales them, and resampled by soxr at "HQ" quality
to the length librosa gives (what the official packages do to the same files).

Every failure is the client's: bytes that are no audio (415), and audio that is empty, cut short or corrupt (400),
each message naming what was sent (`subject`) and the request field it came in (`param`)."""

from __future__ import annotations

import functools
import io
import math

import numpy as np
import soxr

from ..errors import AudioTooLongError, InvalidInputError, UnsupportedMediaError

# A container that declares a duration but decodes to less than this share of it was cut short.
TRUNCATION_TOLERANCE = 0.05


def _to_float(frame_array: np.ndarray, sample_format: str, subject: str, param: str) -> np.ndarray:
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
    raise InvalidInputError(f"unsupported sample format {sample_format!r} in {subject}", param=param)


def _check_wav_complete(data: bytes, subject: str, param: str) -> None:
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
                    f"{subject} is a truncated WAV: its header declares {size} bytes of audio, {present} arrived",
                    param=param,
                )
            return
        offset += 8 + size + (size & 1)


def decode_audio(
    data: bytes,
    subject: str = "the audio",
    param: str = "file",
    max_seconds: float | None = None,
    too_long: str = "",
) -> tuple[np.ndarray, int]:
    """Decode audio bytes -> ((channels, samples) float32, sample rate). Frames are decoded one at a time, and
    audio that passes `max_seconds` (None: no limit) is refused there, its message ending with `too_long` (what
    the limit is): a few KB of a container that lies about its length or its rate never decode to hours."""
    if not data:
        raise InvalidInputError(f"{subject} is empty", param=param)
    _check_wav_complete(data, subject, param)
    import av  # PyAV (FFmpeg), imported on first use: a server that never reads audio runs without it

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.error.FFmpegError, ValueError, UnicodeDecodeError) as exc:
        raise UnsupportedMediaError(
            f"{subject} is not audio in a format this server reads (wav, flac, mp3, ogg, m4a, webm, ...): {exc}",
            param=param,
        ) from None
    with container:
        if not container.streams.audio:
            raise UnsupportedMediaError(f"{subject} holds no audio stream", param=param)
        stream = container.streams.audio[0]
        declared = float(container.duration) / av.time_base if container.duration else None
        chunks = []
        seconds = 0.0
        try:
            for frame in container.decode(stream):
                array = frame.to_ndarray()
                channels = len(frame.layout.channels)
                if not frame.format.is_planar:  # packed: (1, samples * channels)
                    array = array.reshape(-1, channels).T
                chunks.append(_to_float(array, frame.format.name, subject, param))
                rate = frame.sample_rate
                seconds += frame.samples / rate
                if max_seconds is not None and seconds > max_seconds:
                    raise AudioTooLongError(f"{subject} lasts more than {max_seconds:g} s; {too_long}", param=param)
        except (av.error.FFmpegError, ValueError) as exc:
            raise InvalidInputError(
                f"{subject} could not be decoded as audio; it may be truncated or corrupt ({exc})", param=param
            ) from None
    if not chunks:
        raise InvalidInputError(f"{subject} decodes to no samples", param=param)
    audio = np.concatenate(chunks, axis=1)
    if not np.isfinite(audio).all():
        raise InvalidInputError(f"{subject} holds samples that are not numbers (NaN or infinity)", param=param)
    decoded = audio.shape[1] / rate
    if declared is not None and decoded < declared * (1 - TRUNCATION_TOLERANCE) - 0.05:
        raise InvalidInputError(
            f"{subject} looks truncated: its header declares {declared:.2f} s but only {decoded:.2f} s could be "
            "decoded",
            param=param,
        )
    return audio, rate


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Mono float32 samples at `rate` -> at `target` by soxr HQ, cut or zero-padded to ceil(n * target / rate)
    samples as librosa.resample leaves them (its float ratio, rounding included)."""
    if rate == target:
        return samples
    out = soxr.resample(samples, rate, target, quality="HQ")
    length = math.ceil(len(samples) * (float(target) / rate))
    if len(out) < length:
        return np.concatenate([out, np.zeros(length - len(out), dtype=out.dtype)])
    return out[:length]


@functools.cache
def _g711_table(codec: str) -> np.ndarray:
    """Every G.711 byte's sample (float32, as 16-bit PCM scaled), decoded once by PyAV's `codec`."""
    import av

    context = av.CodecContext.create(codec, "r")
    context.sample_rate, context.layout = 8000, "mono"
    (frame,) = context.decode(av.Packet(bytes(range(256))))
    return frame.to_ndarray()[0].astype(np.float32) / np.float32(32768.0)


def decode_g711(data: bytes, codec: str) -> np.ndarray:
    """Raw G.711 bytes (`pcm_mulaw` or `pcm_alaw`, a byte a sample) -> float32 samples."""
    return _g711_table(codec)[np.frombuffer(data, np.uint8)]


def pcm_samples(data: bytes, width: int, channels: int) -> np.ndarray:
    """Raw little-endian PCM frames (width 1: unsigned 8-bit; 2, 3, 4: signed) -> mono float32, the channels'
    mean, each width scaled as libsndfile scales it. A trailing partial frame is left out."""
    frames = len(data) // (width * channels)
    raw = np.frombuffer(data[: frames * width * channels], np.uint8)
    if width == 1:
        samples = (raw.astype(np.float32) - np.float32(128.0)) / np.float32(128.0)
    elif width == 3:
        triples = raw.reshape(-1, 3).astype(np.int32)
        values = triples[:, 0] | (triples[:, 1] << 8) | (triples[:, 2] << 16)
        samples = (np.where(values >= 1 << 23, values - (1 << 24), values) / np.float32(1 << 23)).astype(np.float32)
    else:
        kind, scale = ("<i2", 32768.0) if width == 2 else ("<i4", 2147483648.0)
        samples = raw.view(kind).astype(np.float32) / np.float32(scale)
    return samples.reshape(frames, channels).mean(axis=1, dtype=np.float32)
