"""The incremental codec decoder: streamed chunks join into exactly the offline decode."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from parity_cases import random_codes
from qwen3_tts_server.model.tts.codec_stream import StreamingCodecDecoder


def chunk_sizes(schedule: list[int]):
    """1, 2, 4, 8, 8, ... style schedules: the listed sizes, then the last one forever."""
    yield from schedule
    yield from itertools.repeat(schedule[-1])


def stream(decoder: StreamingCodecDecoder, codes: np.ndarray, schedule: list[int]) -> np.ndarray:
    state, pieces, start = decoder.new_state(), [], 0
    for size in chunk_sizes(schedule):
        if start >= len(codes):
            break
        chunk = torch.from_numpy(codes[start : start + size])[None]
        pieces.append(decoder.decode([state], chunk)[0].numpy())
        start += size
    assert state.frames == len(codes)
    return np.concatenate(pieces)


@pytest.mark.parametrize("schedule", [[1, 2, 4, 8], [1], [5, 3], [90]])
def test_streamed_chunks_equal_the_offline_decode(models, schedule):
    model = models["custom_voice"]
    codes = random_codes(150, seed=21)  # spans the 72-frame attention window twice
    offline = model.decode(codes)
    streamed = stream(StreamingCodecDecoder(model.codec), codes, schedule)
    assert streamed.shape == offline.shape == (150 * 1920,)
    assert np.abs(streamed - offline).max() <= 1e-5


def test_rows_at_different_points_decode_together(models):
    model = models["custom_voice"]
    decoder = StreamingCodecDecoder(model.codec)
    first, second = random_codes(100, seed=31), random_codes(100, seed=32)
    ahead, behind = decoder.new_state(), decoder.new_state()
    pieces = {0: [decoder.decode([ahead], torch.from_numpy(first[:37])[None])[0].numpy()], 1: []}
    for start in range(0, 60, 4):  # `ahead` continues at frame 37 while `behind` starts at 0
        batch = torch.from_numpy(np.stack([first[37 + start : 41 + start], second[start : start + 4]]))
        audio = decoder.decode([ahead, behind], batch).numpy()
        pieces[0].append(audio[0])
        pieces[1].append(audio[1])
    assert np.abs(np.concatenate(pieces[0]) - model.decode(first[:97])).max() <= 1e-5
    assert np.abs(np.concatenate(pieces[1]) - model.decode(second[:60])).max() <= 1e-5


def test_a_streams_audio_has_the_same_bits_alone_and_decoded_with_others(models):
    """The engine decodes the streams whose chunks are due together: a stream's audio must not depend on which
    (seeded speech is the same under load). On a CPU, batches of one, two and three round differently."""
    decoder = models["custom_voice"].codec_stream
    codes = [torch.from_numpy(random_codes(12, seed=40 + i)) for i in range(3)]

    def decoded(count: int) -> torch.Tensor:
        states = [decoder.new_state() for _ in range(count)]
        chunks = [decoder.decode(states, torch.stack([c[start:stop] for c in codes[:count]])) for start, stop in
                  ((0, 1), (1, 3), (3, 7), (7, 12))]  # fmt: skip
        return torch.cat(chunks, dim=1)[0]

    alone = decoded(1)
    for count in (2, 3):
        assert torch.equal(decoded(count), alone), f"decoded with {count - 1} others"


def test_streams_with_different_frame_counts_decode_in_one_pass(models):
    """The GPU's one codec pass a step: streams at different points, each with its own number of new frames (padded
    to the most), get the audio each gets decoded alone, and their states carry on from their own last frame."""
    model = models["custom_voice"]
    decoder = StreamingCodecDecoder(model.codec)
    codes = [random_codes(100, seed=50 + i) for i in range(3)]
    starts, counts = [0, 30, 75], [1, 8, 3]  # the second one's window of 72 frames has filled
    states = [decoder.new_state() for _ in codes]
    for state, stream_codes, start in zip(states, codes, starts, strict=True):
        if start:
            decoder.decode([state], torch.from_numpy(stream_codes[:start])[None])
    chunks = [torch.from_numpy(c[s : s + n]) for c, s, n in zip(codes, starts, counts, strict=True)]
    ragged = decoder.decode_ragged(states, chunks)
    # then one more uniform chunk each, from the states the ragged pass left
    after = decoder.decode(states, torch.stack([torch.from_numpy(c[s + n : s + n + 4]) for c, s, n in
                                                zip(codes, starts, counts, strict=True)]))  # fmt: skip
    for row, (stream_codes, start, count) in enumerate(zip(codes, starts, counts, strict=True)):
        offline = model.decode(stream_codes[: start + count + 4])
        assert [state.frames for state in states][row] == start + count + 4
        got = np.concatenate([ragged[row].numpy(), after[row].numpy()])
        assert got.shape == ((count + 4) * 1920,)
        assert np.abs(got - offline[start * 1920 :]).max() <= 1e-5
