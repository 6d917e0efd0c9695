"""Decoding of many transcriptions side by side, a token a step: a row joins with its prompt's prefill (which gives
its first token), every step adds one token to each running row, and a row leaves when it gives a stop token or its
budget is spent. Rows join and leave at any step; each keeps its own slot of one KV cache, its own length and
position, so a row's tokens are the ones it gets decoded alone (docs/asr_reference.md, section g: greedy, no
sampling settings, the stop tokens kept). A row may instead sample at a temperature, from its own seeded generator;
every token comes with its log probability under the model's distribution.

A greedy row may join with a draft of its first tokens (a live pass: what the pass before it gave after the text
both share). The prefill runs over the draft too, and the row keeps as much of it as its own choices confirm, token
by token, with the choice after that: the tokens it would have decoded one step at a time, several from one call.

On CUDA a step whose rows are all greedy runs static (`model/step_graphs.py`, as the speech frame step does): over a
bucket of slots and a rounded span, its input tokens, lengths and choices on the device, replayed from a CUDA graph,
the host reading only the new tokens and their log probabilities. A step with a sampling row runs as on a CPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..layers import KVCache
from ..step_graphs import GraphBackend, StepGraphs, StepOutputs, batch_buckets, no_row_running, rounded_span
from .decoder import AsrDecoder

INITIAL_CAPACITY = 256  # cache positions per row to start with; the cache doubles when a row needs more


@dataclass
class DecodingRow:
    slot: int
    budget: int
    tokens: list[int] = field(default_factory=list)
    temperature: float = 0.0  # 0: greedy
    generator: torch.Generator | None = None  # a sampling row's
    finished: bool = False
    stopped: bool = False  # finished on a stop token (not by its budget)


@dataclass(frozen=True)
class CachedPrompt:
    """The keys and values of a prompt's first `length` positions, in row 0 of their own cache (a live stream's
    instructions and finished audio): a row joining after them prefills only the rest."""

    cache: KVCache
    length: int


@dataclass(frozen=True)
class Emitted:
    """One token a row gained; the last of a row has `finished` set."""

    row: int
    token: int
    finished: bool
    logprob: float  # the token's log probability (the model's distribution, before any temperature)


class GreedyRows:
    """Rows of decoding over one `AsrDecoder` and output `head` (hidden -> logits), at most `slots` at a time."""

    def __init__(
        self,
        decoder: AsrDecoder,
        head: nn.Module,
        stop: frozenset[int],
        slots: int,
        static: bool | None = None,
        graphs: bool | None = None,
        graph_backend: GraphBackend | None = None,
    ):
        self.decoder, self.head, self.stop = decoder, head, stop
        self.dtype, self.device = decoder.norm.weight.dtype, decoder.norm.weight.device
        self.cache = decoder.new_cache(slots, INITIAL_CAPACITY, self.dtype, self.device)
        self.rows: dict[int, DecodingRow] = {}  # the running rows, by id
        self._free = list(range(slots))[::-1]
        self._next_id = 0
        self.drafted = self.confirmed = 0  # draft tokens joined with, and of them those the rows confirmed
        # The static step (None: on CUDA) reads each slot's last token and whether it runs from the device.
        on_cuda = self.device.type == "cuda"
        self.static = on_cuda if static is None else static
        self.buckets = batch_buckets(slots)
        self.last = torch.zeros(slots, dtype=torch.long, device=self.device)
        self.running = torch.zeros(slots, dtype=torch.bool, device=self.device)
        graphed = self.static and (on_cuda if graphs is None else graphs)
        names = ("tokens", "log probabilities")
        quiet = lambda: no_row_running(self.running)  # noqa: E731
        self.graphs = StepGraphs(self._layout, quiet, graph_backend, names) if graphed else None

    @property
    def graphs_state(self) -> str:
        """CUDA graphs of the step: "on", "off" (not asked for, or no CUDA) or "failed (reason)"."""
        return "off" if self.graphs is None else self.graphs.state

    @property
    def free_slots(self) -> int:
        return len(self._free)

    def _choose(self, hidden: torch.Tensor, rows: list[DecodingRow]) -> list[tuple[int, float]]:
        """Each row's next token (its argmax, or a sample at its temperature) and its log probability."""
        logits = self.head(hidden)
        tokens = logits.argmax(dim=-1)  # on the logits themselves: the official package's choice, ties included
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        for index, row in enumerate(rows):
            if row.temperature > 0:
                probabilities = torch.softmax(logprobs[index] / row.temperature, dim=-1)
                tokens[index] = torch.multinomial(probabilities, 1, generator=row.generator)[0]
        chosen = logprobs.gather(1, tokens[:, None])[:, 0]
        return list(zip(tokens.tolist(), chosen.tolist(), strict=True))

    @torch.inference_mode()
    def join(
        self,
        prompt: torch.Tensor,
        budget: int,
        temperature: float = 0.0,
        seed: int | None = None,
        after: CachedPrompt | None = None,
        draft: Sequence[int] = (),
    ) -> tuple[int, list[Emitted]]:
        """A row for an embedded prompt [tokens, hidden] that may add up to `budget` tokens, greedy or sampled at
        `temperature` (from `seed`, else a random one): its id, and its first tokens from the prompt's prefill (one;
        with a greedy row's `draft`, also the draft's confirmed beginning). With `after`, `prompt` is what follows
        that cached beginning."""
        if budget < 1:
            raise ValueError("a row's budget is at least one token")
        if temperature < 0:
            raise ValueError("a row's temperature is 0 (greedy) or more")
        if not self._free:
            raise RuntimeError("every decoding slot is taken")
        slot = self._free.pop()
        row_id, self._next_id = self._next_id, self._next_id + 1
        generator = None
        if temperature > 0:
            generator = torch.Generator(self.device)
            generator.manual_seed(seed) if seed is not None else generator.seed()
        row = DecodingRow(slot=slot, budget=budget, temperature=temperature, generator=generator)
        self.rows[row_id] = row
        start = 0
        if after is not None:
            self.cache.copy_row(after.cache, 0, slot, after.length)
            start = after.length
        guess = list(draft)[: budget - 1] if temperature == 0 else []
        prompt = prompt.to(self.dtype)
        if guess:
            guessed = self.decoder.embed_tokens(torch.tensor(guess, device=self.device)).to(self.dtype)
            prompt = torch.cat([prompt, guessed])
        hidden = self.decoder.extend(prompt[None], self.cache, slice(slot, slot + 1), start)[0, -1 - len(guess) :]
        emitted = []
        for index, (token, logprob) in enumerate(self._choose(hidden, [row] * len(hidden))):
            emitted.append(self._record(row_id, row, token, logprob))
            if row.finished or index == len(guess) or token != guess[index]:
                break
        self.drafted, self.confirmed = self.drafted + len(guess), self.confirmed + len(emitted) - 1
        if not row.finished:  # the cache keeps the prompt and the confirmed draft: the last choice is not in it yet
            self.cache.cut(slot, start + len(prompt) - len(guess) + len(emitted) - 1)
            self.last[slot] = emitted[-1].token
            self.running[slot] = True
        return row_id, emitted

    @torch.inference_mode()
    def join_many(
        self, prompts: list[torch.Tensor], budgets: list[int], packed: bool | None = None
    ) -> list[tuple[int, list[Emitted]]]:
        """Greedy rows for several embedded prompts at once, as `join` gives each: ids and first tokens, in order.
        Packed (None: on CUDA), the prompts are prefilled in one forward (`DecoderStack.prefill_packed`) and their
        first tokens chosen together. A product over more rows may round its last bits otherwise than over one row
        (as the encoder's do on a CPU), so a CPU joins them one at a time and stays bit-exact."""
        if not (self.device.type == "cuda" if packed is None else packed):
            return [self.join(prompt, budget) for prompt, budget in zip(prompts, budgets, strict=True)]
        if len(prompts) > len(self._free):
            raise RuntimeError("every decoding slot is taken")
        if min(budgets) < 1:
            raise ValueError("a row's budget is at least one token")
        rows = []
        for budget in budgets:
            row_id, self._next_id = self._next_id, self._next_id + 1
            self.rows[row_id] = row = DecodingRow(slot=self._free.pop(), budget=budget)
            rows.append((row_id, row))
        lengths = [len(prompt) for prompt in prompts]
        packed_prompts = torch.cat([prompt.to(self.dtype) for prompt in prompts])
        slots = [row.slot for _, row in rows]
        hidden = self.decoder.prefill_packed(packed_prompts, lengths, self.cache, slots)
        chosen = self._choose(hidden, [row for _, row in rows])
        joined = []
        for (row_id, row), (token, logprob) in zip(rows, chosen, strict=True):
            emitted = self._record(row_id, row, token, logprob)
            if not row.finished:
                self.last[row.slot] = token
                self.running[row.slot] = True
            joined.append((row_id, [emitted]))
        return joined

    def _record(self, row_id: int, row: DecodingRow, token: int, logprob: float) -> Emitted:
        row.tokens.append(token)
        row.stopped = token in self.stop
        row.finished = row.stopped or len(row.tokens) >= row.budget
        if row.finished:
            self.leave(row_id)
        return Emitted(row_id, token, row.finished, logprob)

    def leave(self, row_id: int) -> None:
        """Free a row's slot (a finished row leaves by itself; a cancelled one is left here)."""
        row = self.rows.pop(row_id, None)
        if row is not None:
            self.running[row.slot] = False
            self._free.append(row.slot)
            self._free.sort(reverse=True)  # the lowest free slot is popped first

    @torch.inference_mode()
    def step(self) -> list[Emitted]:
        """One token for every running row.

        The step runs over the slots from the first to the last running one, free slots among them included (their
        work is discarded): the cache is read as one slice, not gathered row by row, which at eight rows of a
        0.6B model with 30 s prompts copied most of a gigabyte every step. Slots are handed out lowest first to keep
        that range short."""
        if not self.rows:
            return []
        by_slot = {row.slot: row_id for row_id, row in self.rows.items()}
        if self.static and all(row.temperature == 0 for row in self.rows.values()):
            return self._static_step(by_slot)
        count = max(by_slot) + 1
        span = max(self.cache.lengths[slot] for slot in by_slot) + 1
        self.cache.ensure_capacity(span)
        last = [[self.rows[by_slot[slot]].tokens[-1] if slot in by_slot else 0] for slot in range(count)]
        embedded = self.decoder.embed_tokens(torch.tensor(last, device=self.device)).to(self.dtype)
        hidden = self.decoder.decode(embedded, self.cache, slice(0, count), span)[:, -1]
        running = torch.tensor([slot in by_slot for slot in range(count)], dtype=torch.long, device=self.device)
        self.cache.advance(slice(0, count), running, list(by_slot))
        slots = sorted(by_slot)
        rows = [self.rows[by_slot[slot]] for slot in slots]
        chosen = self._choose(hidden if len(slots) == count else hidden[slots], rows)
        if self.static:  # a sampling row's step: the device's last tokens follow it
            self.last[torch.tensor(slots, device=self.device)] = torch.tensor(
                [t for t, _ in chosen], device=self.device
            )
        return [
            self._record(by_slot[slot], row, token, logprob)
            for slot, row, (token, logprob) in zip(slots, rows, chosen, strict=True)
        ]

    def _static_step(self, by_slot: dict[int, int]) -> list[Emitted]:
        """`step` for greedy rows: the first `bucket` slots (every running one among them) over a span rounded up,
        from its graph when graphs are on; one read of the device, for the new tokens and their log probabilities."""
        slots = sorted(by_slot)
        bucket = next(size for size in self.buckets if size > slots[-1])
        span = rounded_span(max(self.cache.lengths[slot] for slot in slots) + 1)
        self._reserve(span)
        if self.graphs is None:
            tokens, logprobs = self._static_pass(bucket, span)
        else:
            tokens, logprobs = self.graphs.run((bucket, span), lambda: self._static_pass(bucket, span))
        for slot in slots:
            self.cache.lengths[slot] += 1
        chosen = torch.stack((tokens.double(), logprobs.double())).tolist()
        return [
            self._record(by_slot[slot], self.rows[by_slot[slot]], int(chosen[0][slot]), chosen[1][slot])
            for slot in slots
        ]

    def _static_pass(self, bucket: int, span: int) -> StepOutputs:
        """The device work of a static step over the first `bucket` slots: each running slot's next token (argmax)
        and its log probability; the running slots' lengths and last tokens advance. Slots that are not running
        compute what is ignored, their keys written at their own next position, which their next row overwrites."""
        rows = slice(0, bucket)
        running = self.running[rows]
        embedded = self.decoder.embed_tokens(self.last[rows, None]).to(self.dtype)
        hidden = self.decoder.decode(embedded, self.cache, rows, span)[:, -1]
        logits = self.head(hidden)
        tokens = logits.argmax(dim=-1)
        logprobs = torch.log_softmax(logits.float(), dim=-1).gather(1, tokens[:, None])[:, 0]
        self.cache.length[rows] += running
        self.last[rows] = torch.where(running, tokens, self.last[rows])
        return tokens, logprobs

    def _reserve(self, span: int) -> None:
        """Room for a step over `span` positions; the rotary table grows with the cache (it moves only then)."""
        self.cache.ensure_capacity(span)
        self.decoder.rotary.table(self.cache.capacity, self.decoder.rotary_dtype(self.dtype))

    def _layout(self) -> tuple[int, ...]:
        """The addresses of the buffers a static step reads that can move (grown by doubling)."""
        return (self.cache.k.data_ptr(), self.cache.v.data_ptr(), *self.decoder.rotary.addresses())
