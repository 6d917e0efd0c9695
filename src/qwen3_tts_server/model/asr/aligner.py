"""The Qwen3-ForcedAligner's side (docs/asr_reference.md, section k): a transcript's words (`word_split.py`), the
prompt of audio then words each followed by two timestamp slots, one causal pass whose head names an 80 ms step at
every slot, and the steps repaired into a non-decreasing series as the official package repairs them.
`ForcedAligner` is a loaded aligner checkpoint with its word splitter: it times the words of a transcript or of
synthesised speech alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ...errors import InvalidInputError
from .decoder import AsrDecoder
from .loading import AsrCheckpoint
from .mel import checkpoint_features
from .word_split import WordSplitter

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


@dataclass(frozen=True)
class TimedWord:
    text: str
    start: float  # seconds from the clip's start
    end: float


def timed_by_length(words: Sequence[str], start: float, end: float) -> list[TimedWord]:
    """Words without times of their own: `start` to `end` shared by them in proportion to their lengths."""
    total = sum(len(word) for word in words) or 1
    timed, position = [], 0
    for word in words:
        begin = start + (end - start) * position / total
        position += len(word)
        timed.append(TimedWord(word, round(begin, 3), round(start + (end - start) * position / total, 3)))
    return timed


class ForcedAligner:
    """A ForcedAligner checkpoint and the splitter of its words."""

    def __init__(self, checkpoint: AsrCheckpoint, splitter: WordSplitter | None = None):
        if checkpoint.kind != "forced_aligner" or checkpoint.tokens.timestamp is None:
            raise InvalidInputError(f"{checkpoint.directory} is not a ForcedAligner checkpoint", param="aligner")
        self.checkpoint = checkpoint
        self.splitter = splitter or WordSplitter()

    @torch.inference_mode()
    def align_many(self, parts: Sequence[tuple[np.ndarray, str, str, float]]) -> list[list[TimedWord]]:
        """The words of each part (16 kHz wave, text, language heard, offset in seconds) with their times, the part
        starting `offset` seconds into its clip: on CUDA their audio encoded and their prompts run together
        (`AudioEncoder.encode_many`, `slot_steps`), on a CPU one at a time."""
        if not parts:
            return []
        aligner = self.checkpoint
        words = [self.splitter.words(text, language) for _, text, language, _ in parts]
        audio = aligner.encoder.encode_many(
            [checkpoint_features(wave, aligner.device, aligner.dtype) for wave, _, _, _ in parts]
        )
        ids = [
            torch.tensor(aligner.tokenizer.encode(aligner_prompt(part, len(encoded))), device=aligner.device)
            for part, encoded in zip(words, audio, strict=True)
        ]
        prompts = [
            aligner.decoder.embed_prompt(part_ids, encoded, aligner.tokens.audio_pad)
            for part_ids, encoded in zip(ids, audio, strict=True)
        ]
        steps = slot_steps(aligner.decoder, aligner.head, prompts, ids, aligner.tokens.timestamp)
        return [
            [
                TimedWord(word, round(start + offset, 3), round(end + offset, 3))
                for word, start, end in timed_words(part, part_steps, aligner.step_ms)
            ]
            for part, part_steps, (_, _, _, offset) in zip(words, steps, parts, strict=True)
        ]
