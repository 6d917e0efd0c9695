"""The recognition benchmarks' workload (benchmarks/asr_*.py): speech-like clips decoded to a fixed number of
tokens with the end of text held off, so that every engine and precision does the same work; and teacher-forced
agreement of a precision with float32's greedy tokens."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..model.asr.decoding import GreedyRows
from ..model.asr.transcriber import Transcriber
from ..testing.signals import voiced_glide

SAMPLE_RATE = 16000
# The precisions the benchmarks compare: name -> (activation dtype, weight quantisation)
VARIANTS = {"float32": ("float32", None), "bfloat16": ("bfloat16", None), "int8": ("float32", "int8"),
            "int4": ("float32", "int4"), "int8-bfloat16": ("bfloat16", "int8"),
            "int4-bfloat16": ("bfloat16", "int4"), "w8a8": ("float32", "w8a8"),
            "w8a8-bfloat16": ("bfloat16", "w8a8")}  # fmt: skip


class HeldOpen(Transcriber):
    """The transcriber with no stop token: every row it makes decodes its whole budget."""

    stop_tokens = frozenset()


def bench_clips(count: int, seconds: float) -> list[np.ndarray]:
    """`count` different 16 kHz clips (voices pitched apart)."""
    return [voiced_glide(seconds, SAMPLE_RATE, pitch=110.0 + 17.0 * index) for index in range(count)]


@dataclass(frozen=True)
class Timing:
    seconds: float  # wall time from audio to the last token
    encode_prefill: float  # of which: features, encoder and prompt prefill, all clips
    tokens: list[list[int]]


def held_open(transcriber: Transcriber, waves: list[np.ndarray], tokens: int, context: str = "") -> Timing:
    """Every clip decoded side by side to exactly `tokens` tokens (no stop token ends a row); the clips encoded and
    prefilled together (on CUDA; one at a time on a CPU)."""
    model = transcriber.model
    rows = GreedyRows(model.decoder, model.head, frozenset(), len(waves))
    started = time.perf_counter()
    got: dict[int, list[int]] = {}
    prompts = transcriber.embedded_prompts([(wave, context, None) for wave in waves])
    for row, (first,) in rows.join_many(prompts, [tokens] * len(waves)):
        got[row] = [first.token]
    joined = time.perf_counter()
    while rows.rows:
        for emitted in rows.step():
            got[emitted.row].append(emitted.token)
    return Timing(time.perf_counter() - started, joined - started, [got[row] for row in sorted(got)])


@torch.inference_mode()
def forced_choices(transcriber: Transcriber, wave: np.ndarray, reference: list[int]) -> list[int]:
    """The token the model picks at each step of `reference` when given the reference's earlier tokens (one
    prefill of the prompt and the reference)."""
    model = transcriber.model
    prompt = transcriber.embedded_prompt(wave)
    given = model.decoder.embed_tokens(torch.tensor(reference[:-1], device=model.device)).to(prompt.dtype)
    sequence = torch.cat([prompt, given])
    cache = model.decoder.new_cache(1, len(sequence), model.dtype, model.device)
    hidden = model.decoder.prefill(sequence[None], cache, slice(0, 1))[0, len(prompt) - 1 :]
    return model.head(hidden).argmax(dim=-1).tolist()
