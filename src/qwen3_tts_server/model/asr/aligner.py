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
def slot_steps(
    decoder: AsrDecoder,
    head: nn.Module,
    prompts: list[torch.Tensor],
    ids: list[torch.Tensor],
    slot: int,
    packed: bool | None = None,
) -> list[list[int]]:
    """The head's step (argmax) at every timestamp slot of each embedded prompt [tokens, hidden], in order. Packed
    (None: on CUDA), the prompts run in one causal pass (`DecoderStack.prefill_packed`); on a CPU one at a time, as
    bit-exact as alone (a product over more rows may round its last bits otherwise)."""
    device = prompts[0].device
    if not (device.type == "cuda" if packed is None else packed):
        hidden = []
        for prompt in prompts:
            cache = decoder.new_cache(1, len(prompt), prompt.dtype, device)
            hidden.append(decoder.prefill(prompt[None], cache, slice(0, 1))[0])
    else:
        lengths = [len(prompt) for prompt in prompts]
        cache = decoder.new_cache(len(prompts), max(lengths), prompts[0].dtype, device)
        rows = list(range(len(prompts)))
        hidden = list(
            decoder.prefill_packed(torch.cat(prompts), lengths, cache, rows, every_position=True).split(lengths)
        )
    slots = [prompt_ids == slot for prompt_ids in ids]
    steps = head(torch.cat([states[at] for states, at in zip(hidden, slots, strict=True)])).argmax(dim=-1)
    return [part.tolist() for part in steps.split([int(at.sum()) for at in slots])]


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
