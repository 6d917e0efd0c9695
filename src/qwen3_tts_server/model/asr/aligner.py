"""The Qwen3-ForcedAligner's side (docs/asr_reference.md, section k): a transcript's words (`word_split.py`), the
prompt of audio then words each followed by two timestamp slots, one causal pass whose head names an 80 ms step at
every slot, and the steps repaired into a non-decreasing series as the official package repairs them."""

from __future__ import annotations

import torch
from torch import nn

from .decoder import AsrDecoder

SLOTS = "<timestamp><timestamp>"  # a word's start and end


def aligner_prompt(words: list[str], audio_tokens: int) -> str:
    """The aligner's input: no chat turns, the audio, then the words with their slots, no spaces between."""
    return "<|audio_start|>" + "<|audio_pad|>" * audio_tokens + "<|audio_end|>" + SLOTS.join(words) + SLOTS


@torch.inference_mode()
def slot_steps(decoder: AsrDecoder, head: nn.Module, prompt: torch.Tensor, ids: torch.Tensor, slot: int) -> list[int]:
    """The head's step (argmax) at every timestamp slot of one embedded prompt [tokens, hidden], in order."""
    cache = decoder.new_cache(1, len(prompt), prompt.dtype, prompt.device)
    hidden = decoder.prefill(prompt[None], cache, slice(0, 1))[0]
    return head(hidden[ids == slot]).argmax(dim=-1).tolist()


def repair_timestamps(values: list[float]) -> list[int]:
    """A series made non-decreasing as the official aligner makes it: the longest non-decreasing subsequence (the
    earliest-ending one, each element's predecessor the first that lengthens it) stays; every run of other values
    is replaced, a run of one or two by its nearer kept neighbour (the left on a tie), a longer one by steps
    evenly spaced between its neighbours (or the one neighbour it has); then truncated to integers."""
    count = len(values)
    length, previous = [1] * count, [-1] * count
    for i in range(count):
        for j in range(i):
            if values[j] <= values[i] and length[j] + 1 > length[i]:
                length[i], previous[i] = length[j] + 1, j
    kept = [False] * count
    index = length.index(max(length)) if count else -1
    while index != -1:
        kept[index], index = True, previous[index]
    result: list[float] = list(values)
    start = 0
    while start < count:
        if kept[start]:
            start += 1
            continue
        end = start
        while end < count and not kept[end]:
            end += 1
        left = next((values[k] for k in range(start - 1, -1, -1) if kept[k]), None)
        right = next((values[k] for k in range(end, count) if kept[k]), None)
        if left is None or right is None:  # the kept subsequence is never empty: one of them is there
            result[start:end] = [left if right is None else right] * (end - start)
        elif end - start <= 2:
            result[start:end] = [left if k - (start - 1) <= end - k else right for k in range(start, end)]
        else:
            result[start:end] = [left + (right - left) / (end - start + 1) * (k - start + 1) for k in range(start, end)]
        start = end
    return [int(value) for value in result]


def timed_words(words: list[str], steps: list[int], step_ms: float) -> list[tuple[str, float, float]]:
    """(word, start s, end s) from the slots' steps, repaired, in milliseconds rounded to 3 decimals of a second."""
    times = repair_timestamps([step * step_ms for step in steps])
    return [
        (word, round(times[2 * i] / 1000.0, 3), round(times[2 * i + 1] / 1000.0, 3)) for i, word in enumerate(words)
    ]
