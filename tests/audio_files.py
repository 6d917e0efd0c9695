"""Audio files in the formats clients send, encoded by PyAV (FFmpeg's encoders) for the decoding tests."""

from __future__ import annotations

import io

import av
import numpy as np


def encode_with_pyav(data: np.ndarray, rate: int, container: str, codec: str) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout="mono" if data.shape[1] == 1 else "stereo")
        frame_size = stream.codec_context.frame_size or 1024
        fmt = stream.codec_context.format.name
        for start in range(0, len(data), frame_size):
            chunk = data[start : start + frame_size]
            frame = av.AudioFrame.from_ndarray(
                chunk.T.copy() if fmt.endswith("p") else chunk.reshape(1, -1),
                format="fltp" if fmt.endswith("p") else "flt",
                layout=stream.layout.name,
            )
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()
