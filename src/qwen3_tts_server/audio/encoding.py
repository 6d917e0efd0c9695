"""PCM -> the response formats, incrementally: each `write` returns the bytes that are ready to send.

Containers and codecs are PyAV's (libmp3lame, libopus in Ogg with short pages, AAC in ADTS, FLAC, PCM
in WAV); raw `pcm` is 16-bit little-endian with no header; `mulaw` and `alaw` are G.711 at 8 kHz for
telephony. Resampling (an output rate other than the model's) is soxr's streaming resampler.
"""

from __future__ import annotations

from dataclasses import dataclass

import av
import numpy as np
import soxr

from ..errors import InvalidInputError


@dataclass(frozen=True)
class AudioFormat:
    name: str
    container: str | None  # None: raw samples, no container
    codec: str
    media_type: str
    default_rate: int | None = None  # None: the source's rate (the model's)
    rates: tuple[int, ...] | None = None  # None: any rate


FORMATS = {
    f.name: f
    for f in (
        AudioFormat("mp3", "mp3", "libmp3lame", "audio/mpeg", rates=(8000, 16000, 22050, 24000, 32000, 44100, 48000)),
        AudioFormat("opus", "ogg", "libopus", "audio/ogg", rates=(8000, 12000, 16000, 24000, 48000)),
        AudioFormat("aac", "adts", "aac", "audio/aac", rates=(8000, 16000, 22050, 24000, 32000, 44100, 48000)),
        AudioFormat("flac", "flac", "flac", "audio/flac"),
        AudioFormat("wav", "wav", "pcm_s16le", "audio/wav"),
        AudioFormat("pcm", None, "pcm_s16le", "audio/pcm"),
        AudioFormat("mulaw", None, "pcm_mulaw", "audio/basic", default_rate=8000),
        AudioFormat("alaw", None, "pcm_alaw", "audio/x-alaw-basic", default_rate=8000),
    )
}


def audio_format(name: str, sample_rate: int | None, source_rate: int) -> tuple[AudioFormat, int]:
    """The format and output rate for a request (audio made at `source_rate`); unknown names and unsupported
    rates are refused."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise InvalidInputError(
            f"unsupported response_format {name!r}; choose one of {', '.join(FORMATS)}", param="response_format"
        )
    rate = sample_rate or fmt.default_rate or source_rate
    if not 8000 <= rate <= 48000 or (fmt.rates is not None and rate not in fmt.rates):
        allowed = ", ".join(map(str, fmt.rates)) if fmt.rates else "8000 to 48000"
        raise InvalidInputError(f"{name} cannot be sent at {rate} Hz; allowed: {allowed}", param="sample_rate")
    return fmt, rate


class _Sink:
    """A write-only file object that PyAV muxes into; `drain` hands over what has been written."""

    def __init__(self):
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


class StreamEncoder:
    """Feed float32 mono chunks at `source_rate` to `write`; call `close` once for the trailing bytes. The
    format and `rate` are `audio_format`'s."""

    def __init__(self, format: AudioFormat, rate: int, source_rate: int):
        self.format, self.rate = format, rate
        self._resampler = (
            soxr.ResampleStream(source_rate, rate, 1, dtype="float32", quality="HQ") if rate != source_rate else None
        )
        self._sink = _Sink()
        self._container = None
        if self.format.container is not None:
            options = {"page_duration": "20000"} if self.format.container == "ogg" else {}
            self._container = av.open(self._sink, mode="w", format=self.format.container, options=options)
            self._stream = self._container.add_stream(self.format.codec, rate=self.rate, layout="mono")
        else:
            self._codec = av.CodecContext.create(self.format.codec, "w")
            self._codec.sample_rate, self._codec.layout, self._codec.format = self.rate, "mono", "s16"
            self._codec.open()
        self._pts = 0

    @property
    def media_type(self) -> str:
        return self.format.media_type

    def write(self, audio: np.ndarray) -> bytes:
        samples = np.asarray(audio, dtype=np.float32)
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples)
        return self._encode(samples)

    def close(self) -> bytes:
        tail = (
            self._encode(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)) if self._resampler else b""
        )
        if self._container is not None:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
            return tail + self._sink.drain()
        return tail + b"".join(bytes(p) for p in self._codec.encode(None))

    def _encode(self, samples: np.ndarray) -> bytes:
        if not len(samples):
            return b""
        pcm16 = np.round(np.clip(samples, -1.0, 1.0) * 32767.0).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(pcm16[None], format="s16", layout="mono")
        frame.sample_rate, frame.pts = self.rate, self._pts
        self._pts += len(pcm16)
        if self.format.name == "pcm":
            return pcm16.tobytes()
        if self._container is None:
            return b"".join(bytes(p) for p in self._codec.encode(frame))
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._sink.drain()
