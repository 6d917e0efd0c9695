"""Live recognition of one utterance as the official streaming algorithm defines it (qwen-asr 0.0.6,
`Qwen3ASRModel.streaming_transcribe`, on its vLLM backend only): the audio is taken in chunks of 2 s, and at every
chunk all the audio heard so far is transcribed again, the answer begun with a text prefix: none for the first two
chunks, then the previous output less its last five tokens (more while the cut splits a character). `finish`
flushes a tail shorter than a chunk the same way (keeping at least one token). After each pass the output is read
as a transcription (its language and text).

The official code pays for all the audio heard at every pass, so each costs more than the last. `IncrementalPasses`
computes the same passes without recomputing what has not changed: the encoder's output for an 8 s block whose
features are bitwise the same as when it was encoded (the log-mel floor follows the loudest frame so far, so a
louder frame can change earlier ones: they are compared, never assumed), the open block's 1 s chunks through the
convolutions whose features are unchanged the same way, and the decoder's keys and values of the prompt's beginning
and of the finished blocks. Only the open block's attention, its new seconds' convolutions, the prompt's end and
the text prefix are computed at every pass. `RecomputedPasses` computes everything at every pass, as the official
code does: the reference the incremental passes are tested against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ..layers import KVCache
from .decoding import INITIAL_CAPACITY, CachedPrompt, GreedyRows
from .encoder import audio_tokens
from .mel import HOP, N_FFT, SAMPLE_RATE
from .transcriber import MIN_SAMPLES, Transcriber, part_budget
from .transcript import parse_transcript


@dataclass(frozen=True)
class StreamingSettings:
    """The official algorithm's parameters (its defaults), and each pass's token budget."""

    chunk_seconds: float = 2.0
    unfixed_chunks: int = 2  # passes without a text prefix
    unfixed_tokens: int = 5  # tokens of the previous output left out of the prefix
    max_new_tokens: int | None = None  # a pass's budget; None: `part_budget` of the audio heard

    @property
    def chunk_samples(self) -> int:
        return max(1, round(self.chunk_seconds * SAMPLE_RATE))


class Passes(Protocol):
    language: str | None  # forced (an official name); None: identified

    def run(self, heard: np.ndarray, prefix: str, budget: int, draft: Sequence[int] = ()) -> list[int]:
        """The tokens generated for all the audio heard, the answer begun with `prefix` (`draft`: a guess at the
        first of them, which changes nothing but the time it takes)."""


def cut_output(transcriber: Transcriber, output: str, unfixed_tokens: int, final: bool) -> tuple[str, list[int]]:
    """The previous output re-encoded, less its last `unfixed_tokens` tokens: more while the cut leaves a partial
    character; at the final flush exactly that many, but at least one token kept. That text (the next pass's
    prefix), and the tokens cut off."""
    tokenizer = transcriber.model.tokenizer
    ids = tokenizer.encode(output)
    if final:
        end = max(1, len(ids) - unfixed_tokens)
        return tokenizer.decode(ids[:end]), ids[end:]
    for end in range(len(ids) - unfixed_tokens, 0, -1):
        prefix = tokenizer.decode(ids[:end])
        if "\ufffd" not in prefix:
            return prefix, ids[end:]
    return "", ids


def text_prefix(transcriber: Transcriber, output: str, unfixed_tokens: int, final: bool) -> str:
    """The next pass's prefix (`cut_output`)."""
    return cut_output(transcriber, output, unfixed_tokens, final)[0]


def decode_alone(
    rows: GreedyRows, prompt: torch.Tensor, after: CachedPrompt | None, budget: int, draft: Sequence[int] = ()
) -> list[int]:
    """One row's tokens, decoded to its end."""
    row, first = rows.join(prompt, budget, after=after, draft=draft)
    tokens, finished = [emitted.token for emitted in first], first[-1].finished
    while not finished:
        (emitted,) = rows.step()
        tokens.append(emitted.token)
        finished = emitted.finished
    return tokens


@dataclass(frozen=True)
class Pass:
    """One pass to run: all the audio heard, the text the answer begins with, the token budget, and a guess at its
    first tokens: what the pass before gave after that text (with real speech, mostly what this one gives again)."""

    heard: np.ndarray
    prefix: str
    budget: int
    draft: tuple[int, ...] = ()


@dataclass
class LiveUtterance:
    """One utterance through the official algorithm: `feed` 16 kHz mono float samples, `finish` at its end; after
    each pass, `heard_language` and `text` are the transcription so far. A caller that runs passes itself (the
    engine) takes them with `next_pass` and hands back their tokens with `passed`."""

    transcriber: Transcriber
    passes: Passes
    settings: StreamingSettings = field(default_factory=StreamingSettings)
    heard: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    chunks: int = 0  # passes begun
    output: str = ""  # the last pass's prefix and generated text, as decoded
    heard_language: str = ""
    text: str = ""

    @property
    def settled(self) -> str:
        """The output's beginning that every later pass keeps (it begins their answers): the next pass's prefix."""
        if self.chunks < self.settings.unfixed_chunks:
            return ""
        return text_prefix(self.transcriber, self.output, self.settings.unfixed_tokens, final=False)

    def take(self, samples: np.ndarray) -> None:
        self.pending = np.concatenate([self.pending, np.asarray(samples, np.float32).reshape(-1)])

    def next_pass(self, final: bool = False) -> Pass | None:
        """The pass of the next whole chunk, else (with `final`) of the tail shorter than a chunk, its audio moved
        from pending to heard; None when there is none to run."""
        size = self.settings.chunk_samples
        if len(self.pending) >= size:
            final = False
        elif final and len(self.pending):
            size = len(self.pending)
        else:
            return None
        chunk, self.pending = self.pending[:size], self.pending[size:]
        self.heard = np.concatenate([self.heard, chunk])
        if self.chunks >= self.settings.unfixed_chunks:
            prefix, draft = cut_output(self.transcriber, self.output, self.settings.unfixed_tokens, final)
        else:  # no prefix: the pass answers from its start, as the one before did
            prefix, draft = "", self.transcriber.model.tokenizer.encode(self.output)
        self.chunks += 1
        if len(self.heard) < MIN_SAMPLES:  # not one feature frame yet: nothing heard
            return None
        budget = self.settings.max_new_tokens or part_budget(len(self.heard))
        # a guess as long as the part of the output the algorithm leaves unfixed: a wrong guess costs its rows
        return Pass(self.heard, prefix, budget, tuple(draft[: self.settings.unfixed_tokens]))

    def passed(self, done: Pass, generated: list[int]) -> None:
        """A pass's generated tokens: the transcription so far."""
        self.output = done.prefix + self.transcriber.model.tokenizer.decode(generated, skip_special=True)
        self.heard_language, self.text = parse_transcript(self.output, self.passes.language)

    def feed(self, samples: np.ndarray) -> int:
        """Run a pass for every whole chunk the samples complete; how many ran."""
        self.take(samples)
        ran = 0
        while (step := self.next_pass()) is not None:
            self.passed(step, self.passes.run(step.heard, step.prefix, step.budget, step.draft))
            ran += 1
        return ran

    def finish(self) -> None:
        """The tail shorter than a chunk, if any, in a last pass."""
        while (step := self.next_pass(final=True)) is not None:
            self.passed(step, self.passes.run(step.heard, step.prefix, step.budget, step.draft))


class RecomputedPasses:
    """Every pass computed from nothing, as the official code runs it."""

    def __init__(self, transcriber: Transcriber, context: str = "", language: str | None = None):
        self.transcriber, self.context, self.language = transcriber, context, language

    def run(self, heard: np.ndarray, prefix: str, budget: int, draft: Sequence[int] = ()) -> list[int]:
        """The pass decoded a token a step, as the official code does (`draft` unused: this is the reference)."""
        model = self.transcriber.model
        audio = self.transcriber.encode(model, heard)
        ids = self.transcriber.prompt_ids(self.context, self.language, len(audio), prefix)
        prompt = model.decoder.embed_prompt(ids, audio, model.tokens.audio_pad)
        return decode_alone(self.transcriber.rows(1), prompt, None, budget)


@dataclass
class _Block:
    features: torch.Tensor  # [mel bins, block frames], as encoded
    tokens: torch.Tensor  # its encoder output


@dataclass
class _Chunk:
    features: torch.Tensor  # [frames, mel bins] of a 1 s chunk of the open block, as convolved
    pad_to: int
    tokens: torch.Tensor  # its convolved tokens


@dataclass(frozen=True)
class PromptHead:
    """The prompt up to its first audio token (the instructions, the context, the audio's opening) and its keys and
    values: the same for every utterance of a context and forced language, so a live session computes it once."""

    ids: list[int]
    cache: KVCache  # row 0, `len(ids)` positions
    transcriber: Transcriber  # whose decoder made them
    context: str
    language: str | None

    def serves(self, transcriber: Transcriber, context: str, language: str | None) -> bool:
        """Whether it is the head of `transcriber`'s prompts for `context` and `language`."""
        return (self.transcriber, self.context, self.language) == (transcriber, context, language)

    @classmethod
    @torch.inference_mode()
    def compute(cls, transcriber: Transcriber, context: str, language: str | None) -> PromptHead:
        model = transcriber.model
        ids = transcriber.prompt_ids(context, language, 1).tolist()
        ids = ids[: ids.index(model.tokens.audio_pad)]
        cache = model.decoder.new_cache(1, len(ids), model.decoder.norm.weight.dtype, model.device)
        embedded = model.decoder.embed_tokens(torch.tensor([ids], device=model.device)).to(cache.k.dtype)
        model.decoder.extend(embedded, cache, slice(0, 1), 0)
        return cls(ids, cache, transcriber, context, language)


class IncrementalPasses:
    """The same passes, reusing the encoder output of unchanged finished blocks and the decoder's keys and values of
    the prompt's head (`head`: one computed before for this context and language, else computed on the first pass)
    and of those blocks. `encoded_blocks`, `convolved_chunks` and `prefilled` count the work done."""

    def __init__(
        self, transcriber: Transcriber, context: str = "", language: str | None = None, head: PromptHead | None = None
    ):
        self.transcriber, self.context, self.language = transcriber, context, language
        if head is not None and not head.serves(transcriber, context, language):
            raise ValueError("the prompt head was computed for another context or language, or by another model")
        self.head = head
        model = transcriber.model
        dtype, device = model.decoder.norm.weight.dtype, model.device
        self.stored = model.decoder.new_cache(1, INITIAL_CAPACITY, dtype, device)  # the head, then stored blocks
        self.stored_blocks = 0
        self.blocks: list[_Block] = []  # the finished blocks' encodings, in order
        self.chunks: dict[int, _Chunk] = {}  # the open blocks' convolved chunks, by index in the utterance
        self.encoded_blocks = 0  # blocks encoded, since the start
        self.convolved_chunks = 0  # chunks convolved, since the start
        self.prefilled = 0  # prompt positions run through the decoder, since the start

    def run(self, heard: np.ndarray, prefix: str, budget: int, draft: Sequence[int] = ()) -> list[int]:
        return decode_alone(self.transcriber.rows(1), *self.prepare(heard, prefix), budget, draft)

    @torch.inference_mode()
    def prepare(self, heard: np.ndarray, prefix: str) -> tuple[torch.Tensor, CachedPrompt]:
        """What a row joins with for this pass: the prompt after the stored beginning, embedded, and that
        beginning (a row of the engine's `GreedyRows` joins with them as with any prompt)."""
        model = self.transcriber.model
        head = len(self._head().ids)
        audio = self._encode(heard)
        self._store()
        reused = head + self.stored_blocks * audio_tokens(model.encoder.block_frames)
        ids = self.transcriber.prompt_ids(self.context, self.language, len(audio), prefix)
        rest = model.decoder.embed_prompt(ids[reused:], audio[reused - head :], model.tokens.audio_pad)
        self.prefilled += len(rest)
        return rest, CachedPrompt(self.stored, reused)

    def _head(self) -> PromptHead:
        if self.head is None:
            self.head = PromptHead.compute(self.transcriber, self.context, self.language)
            self.prefilled += len(self.head.ids)
        return self.head

    def _encode(self, heard: np.ndarray) -> torch.Tensor:
        """All the audio heard, encoded: finished blocks whose features are unchanged taken as they were."""
        model = self.transcriber.model
        encoder, size = model.encoder, model.encoder.block_frames
        features = self.transcriber.features(model, heard)
        pieces = list(features.split(size, dim=1))
        kept = 0
        while kept < min(len(self.blocks), len(pieces)) and torch.equal(self.blocks[kept].features, pieces[kept]):
            kept += 1
        del self.blocks[kept:]
        if self.stored_blocks > kept:
            self.stored.cut(0, len(self._head().ids) + kept * audio_tokens(size))
            self.stored_blocks = kept
        final_frames = (len(heard) - N_FFT // 2) // HOP + 1  # frames whose window lies within the audio heard
        pad_to = min(features.shape[1], encoder.config.chunk_frames)
        encoded = [block.tokens for block in self.blocks]
        for index in range(kept, len(pieces)):
            tokens = encoder.attend(self._convolve(index, pieces[index], pad_to))
            self.encoded_blocks += 1
            encoded.append(tokens)
            if (index + 1) * size <= final_frames:  # finished: kept for reuse (finished blocks come first)
                self.blocks.append(_Block(pieces[index], tokens))
                ends = (index + 1) * encoder.block_chunks  # its chunks are needed no more
                self.chunks = {at: chunk for at, chunk in self.chunks.items() if at >= ends}
        return torch.cat(encoded)

    def _convolve(self, index: int, features: torch.Tensor, pad_to: int) -> torch.Tensor:
        """Block `index`'s convolved tokens (what `AudioEncoder.encode_block` attends over): its 1 s chunks whose
        features and padding are bitwise as when they were convolved taken as they were, the others convolved."""
        encoder = self.transcriber.model.encoder
        pieces = list(features.T.split(encoder.config.chunk_frames))
        first = index * encoder.block_chunks  # its first chunk's index
        fresh = [at for at, piece in enumerate(pieces, first) if not self._unchanged(at, piece, pad_to)]
        if fresh:
            convolved = encoder.convolve([pieces[at - first] for at in fresh], pad_to)
            for at, tokens in zip(fresh, convolved, strict=True):
                self.chunks[at] = _Chunk(pieces[at - first].clone(), pad_to, tokens)
            self.convolved_chunks += len(fresh)
        return torch.cat([self.chunks[at].tokens for at in range(first, first + len(pieces))])

    def _unchanged(self, at: int, features: torch.Tensor, pad_to: int) -> bool:
        chunk = self.chunks.get(at)
        return chunk is not None and chunk.pad_to == pad_to and torch.equal(chunk.features, features)

    def _store(self) -> None:
        """The head and every kept block, in the stored keys and values."""
        model = self.transcriber.model
        if not self.stored.lengths[0]:
            head = self._head()
            self.stored.copy_row(head.cache, 0, 0, len(head.ids))
        pad, device = model.tokens.audio_pad, self.stored.k.device
        for block in self.blocks[self.stored_blocks :]:  # embedded as in a whole prompt (`embed_prompt`)
            ids = torch.full((len(block.tokens),), pad, device=device)
            embedded = model.decoder.embed_prompt(ids, block.tokens, pad)[None].to(self.stored.k.dtype)
            model.decoder.extend(embedded, self.stored, slice(0, 1), self.stored.lengths[0])
            self.prefilled += len(ids)
            self.stored_blocks += 1
