"""The codec decoder on long code sequences: decoded in pieces, the pieces join exactly."""

from __future__ import annotations

import numpy as np
import torch

from parity_cases import random_codes
from qwen3_tts_server.model.tts.tts_model import CODEC_CHUNK_FRAMES


def test_long_codes_decode_in_pieces_exactly_like_one_pass(models):
    model = models["custom_voice"]
    frames = CODEC_CHUNK_FRAMES + 97
    codes = random_codes(frames, seed=5)
    pieces = model.decode(codes)
    with torch.inference_mode():
        whole = model.codec(torch.from_numpy(codes).T[None])[0].numpy()
    assert pieces.shape == whole.shape == (frames * 1920,)
    assert np.abs(pieces - whole).max() <= 1e-5


def test_decoding_a_prefix_gives_a_prefix_of_the_audio(models):
    model = models["custom_voice"]
    codes = random_codes(120, seed=6)
    full = model.decode(codes)
    prefix = model.decode(codes[:50])
    assert np.abs(full[: len(prefix)] - prefix).max() <= 1e-5
