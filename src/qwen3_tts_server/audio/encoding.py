"""PCM -> the response formats, incrementally: each `write` returns the bytes that are ready to send.

Containers and codecs are PyAV's (libmp3lame, libopus in Ogg with short pages, as `opus` and as `ogg`, AAC in
ADTS, FLAC, PCM in WAV); raw `pcm` is 16-bit little-endian with no header; `mulaw` and `alaw` are G.711 at
8 kHz for telephony. Resampling (an output rate other than the model's) is soxr's streaming resampler.

A streamed WAV or FLAC cannot know its length when its header goes out, so a WAV's RIFF and data sizes say
0xFFFFFFFF and a FLAC's total sample count 0 (unknown); `whole_file` writes the real ones into a file that is
sent or stored in one piece.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import pack

import numpy as np
import soxr

from ..errors import InvalidInputError, shown


@dataclass(frozen=True)
class AudioFormat:
    name: str
    container: str | None  # None: raw samples, no container
    codec: str
    media_type: str
    default_rate: int | None = None  # None: the source's rate (the model's)
    rates: tuple[int, ...] | None = None  # None: any rate


UNKNOWN_SIZE = 0xFFFFFFFF  # a streamed WAV's RIFF and data sizes: written before the length is known
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)

FORMATS = {
    f.name: f
    for f in (
        AudioFormat("mp3", "mp3", "libmp3lame", "audio/mpeg", rates=(8000, 16000, 22050, 24000, 32000, 44100, 48000)),
        AudioFormat("opus", "ogg", "libopus", "audio/ogg", rates=OPUS_RATES),
        AudioFormat("ogg", "ogg", "libopus", "audio/ogg", rates=OPUS_RATES),  # the earlier server's name for opus
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
            f"unsupported response_format {shown(name)}; choose one of {', '.join(FORMATS)}", param="response_format"
        )
    rate = sample_rate or fmt.default_rate or source_rate
    if not 8000 <= rate <= 48000 or (fmt.rates is not None and rate not in fmt.rates):
        allowed = ", ".join(map(str, fmt.rates)) if fmt.rates else "8000 to 48000"
        raise InvalidInputError(f"{name} cannot be sent at {rate} Hz; allowed: {allowed}", param="sample_rate")
    return fmt, rate


def whole_file(format: AudioFormat, data: bytes, samples: int) -> bytes:
    """A complete response of `samples` samples sent or stored in one piece: the streamed bytes, with a WAV's
    exact sizes or a FLAC's sample count."""
    if format.container == "wav":
        return wav_with_sizes(data)
    if format.container == "flac":
        return flac_with_length(data, samples)
    return data


def streamed_file(format: AudioFormat, whole: bytes) -> bytes:
    """A whole file as the stream that made it sent it (`whole_file` undone): a WAV's sizes unknown (0xFFFFFFFF), a
    FLAC's sample count 0. A replay of a streamed answer sends these bytes: the answer's own."""
    if format.container == "wav":
        return wav_with_sizes(whole, unknown=True)
    if format.container == "flac":
        return flac_with_length(whole, 0)
    return whole


def flac_with_length(flac: bytes, samples: int) -> bytes:
    """A complete FLAC with its STREAMINFO's total sample count set (readers such as libsndfile trust it)."""
    if flac[:4] != b"fLaC" or flac[4] & 0x7F != 0 or len(flac) < 42:
        raise ValueError("not a FLAC file starting with its STREAMINFO")
    # STREAMINFO starts at byte 8; its bytes 10-17 hold rate (20 bits), channels, depth (8) and samples (36).
    packed = int.from_bytes(flac[18:26], "big")
    packed = (packed & ~((1 << 36) - 1)) | (samples & ((1 << 36) - 1))
    return flac[:18] + packed.to_bytes(8, "big") + flac[26:]


def wav_with_sizes(wav: bytes, unknown: bool = False) -> bytes:
    """A complete WAV whose data chunk runs to the end of the file (as the encoder writes it), with its RIFF
    and data sizes set to the real ones: readers that trust the header (Python's `wave`) need them. `unknown`: set
    to 0xFFFFFFFF instead, as a streamed WAV's header says."""
    if wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    offset = 12
    while offset + 8 <= len(wav):
        chunk_id, size = wav[offset : offset + 4], int.from_bytes(wav[offset + 4 : offset + 8], "little")
        if chunk_id == b"data":
            riff_size, data_size = (UNKNOWN_SIZE, UNKNOWN_SIZE) if unknown else (len(wav) - 8, len(wav) - offset - 8)
            return b"".join(
                (b"RIFF", pack("<I", riff_size), wav[8 : offset + 4], pack("<I", data_size), wav[offset + 8 :])
            )
        offset += 8 + size + size % 2  # a chunk of odd size is followed by a pad byte
    raise ValueError("a WAV without a data chunk")


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
        self._pts = 0
        if self.format.name == "pcm":  # raw 16-bit samples: nothing to encode (no PyAV)
            return
        import av  # PyAV (FFmpeg) for every other format, imported on first use

        if self.format.container is not None:
            options = {"page_duration": "20000"} if self.format.container == "ogg" else {}
            # bitexact: no LIST/INFO chunk naming the muxer (ISFT "Lavf...") ahead of a WAV's samples
            container_options = {"fflags": "+bitexact"} if self.format.container == "wav" else {}
            self._container = av.open(
                self._sink,
                mode="w",
                format=self.format.container,
                options=options,
                container_options=container_options,
            )
            self._stream = self._container.add_stream(self.format.codec, rate=self.rate, layout="mono")
        else:
            self._codec = av.CodecContext.create(self.format.codec, "w")
            self._codec.sample_rate, self._codec.layout, self._codec.format = self.rate, "mono", "s16"
            self._codec.open()

    @property
    def media_type(self) -> str:
        return self.format.media_type

    def as_file(self, data: bytes) -> bytes:
        """Everything this encoder produced, closed, as a file sent or stored in one piece (`whole_file`)."""
        return whole_file(self.format, data, self._pts)

    def write(self, audio: np.ndarray) -> bytes:
        samples = np.asarray(audio, dtype=np.float32)
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples)
        return self._encode(samples)

    def close(self) -> bytes:
        tail = (
            self._encode(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)) if self._resampler else b""
        )
        if self.format.name == "pcm":
            return tail
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
        self._pts += len(pcm16)
        if self.format.name == "pcm":
            return pcm16.tobytes()
        import av

        frame = av.AudioFrame.from_ndarray(pcm16[None], format="s16", layout="mono")
        frame.sample_rate, frame.pts = self.rate, self._pts - len(pcm16)
        if self._container is None:
            return b"".join(bytes(p) for p in self._codec.encode(frame))
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._sink.drain()
