"""The recogniser's GPU paths, run on the CPU. The static token step (a bucket of slots over a rounded span, its
state on the device: what CUDA graphs replay) gives the tokens of the step that runs exactly the running rows,
whatever rows join, leave, sample or leave holes; its graphs are checked and replayed, and a graph that cannot be
captured turns them off with the same tokens (graphs here come from a backend that runs the step again on each
replay). Clips encoded and prompts prefilled together give what each gets alone, and the engine admits uploads
that way."""

from __future__ import annotations

import asyncio

import pytest
import torch

from qwen3_tts_server.engine.recognition import RecognitionEngine
from qwen3_tts_server.model.asr.decoding import GreedyRows
from qwen3_tts_server.model.asr.encoder import PackedBlocks
from qwen3_tts_server.model.asr.loading import load_asr_checkpoint
from qwen3_tts_server.model.asr.transcriber import Transcriber
from qwen3_tts_server.model.step_graphs import SPAN_STEP
from test_asr_decoder import END, PAD, ROWS, case_prompt, tiny_parts
from test_gpu_fallbacks import EagerReplay
from test_recognition_engine import PARTS, alone, collect, job


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return tiny_parts(tmp_path_factory)


@pytest.fixture(scope="module")
def tiny_transcriber(both_families) -> Transcriber:
    return Transcriber(load_asr_checkpoint(both_families["asr"]))


def schedule(rows: GreedyRows, prompt: torch.Tensor) -> dict[str, list[tuple[int, float]]]:
    """Rows join at different steps (lowest free slot first), one is cancelled (a hole below a running row), one
    samples for a while, one runs long enough to grow the cache past its first capacity; each row's tokens and log
    probabilities, by name."""
    got: dict[str, list[tuple[int, float]]] = {}
    names: dict[int, str] = {}

    def join(name: str, budget: int, temperature: float = 0.0, seed: int | None = None, cut: int = 0) -> None:
        row, emitted = rows.join(prompt[: len(prompt) - cut], budget, temperature, seed)
        names[row] = name
        got[name] = [(e.token, e.logprob) for e in emitted]

    def steps(count: int) -> None:
        for _ in range(count):
            for emitted in rows.step():
                got[names[emitted.row]].append((emitted.token, emitted.logprob))

    join("first", 40)
    steps(2)
    join("cancelled", 30, cut=3)
    join("third", 12, cut=5)
    steps(3)
    rows.leave(next(row for row, name in names.items() if name == "cancelled"))
    join("sampled", 6, temperature=0.8, seed=3)
    steps(2)
    join("long", 300 - len(prompt))
    while rows.rows:
        steps(1)
    return got


def rows_of(decoder, **options) -> GreedyRows:
    head = lambda hidden: hidden @ decoder.embed_tokens.weight.T  # noqa: E731
    return GreedyRows(decoder, head, frozenset({END, PAD}), 6, **options)


def assert_same_tokens(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert [token for token, _ in got[name]] == [token for token, _ in want[name]], name
        assert [p for _, p in got[name]] == pytest.approx([p for _, p in want[name]], abs=1e-5), name


def test_the_static_step_gives_the_tokens_of_the_exact_step(parts):
    _, decoder = parts
    prompt = case_prompt(parts, ROWS[0][0])
    exact = schedule(rows_of(decoder, static=False), prompt)
    static_rows = rows_of(decoder, static=True)
    static = schedule(static_rows, prompt)
    assert len(exact["long"]) == 300 - len(prompt) and static_rows.cache.capacity > 256, "the cache grew"
    assert max(static_rows.cache.lengths) > SPAN_STEP
    assert len(exact["cancelled"]) < 30 and len(exact["sampled"]) == 6
    assert_same_tokens(static, exact)
    assert static_rows.graphs_state == "off" and not static_rows.running.any()


def test_replayed_graphs_give_the_same_tokens_and_a_failed_capture_turns_them_off(parts):
    _, decoder = parts
    prompt = case_prompt(parts, ROWS[0][0])
    exact = schedule(rows_of(decoder, static=False), prompt)
    backend = EagerReplay()
    graphed = rows_of(decoder, static=True, graphs=True, graph_backend=backend)
    assert_same_tokens(schedule(graphed, prompt), exact)
    assert graphed.graphs_state == "on" and backend.replays > backend.captures > 1 and backend.pools >= 1
    refused = rows_of(decoder, static=True, graphs=True, graph_backend=EagerReplay(refuse=True))
    assert_same_tokens(schedule(refused, prompt), exact)
    assert refused.graphs_state.startswith("failed (capture failed: RuntimeError: operation not permitted")


def test_a_graph_whose_replay_differs_is_dropped_for_the_static_step(parts):
    _, decoder = parts
    prompt = case_prompt(parts, ROWS[0][0])
    exact = schedule(rows_of(decoder, static=False), prompt)
    corrupted = rows_of(decoder, static=True, graphs=True, graph_backend=EagerReplay(corrupt=1))
    assert_same_tokens(schedule(corrupted, prompt), exact)
    assert corrupted.graphs_state.startswith("failed (replay differs from the eager step: ")
    assert " tokens differ)" in corrupted.graphs_state


def test_the_static_step_is_on_by_default_only_on_cuda(parts):
    _, decoder = parts
    rows = rows_of(decoder)
    assert rows.static == (decoder.norm.weight.device.type == "cuda")
    assert rows.graphs_state == ("on" if rows.static else "off")


def test_clips_encoded_together_get_what_each_gets_alone(parts):
    """Clips shorter than a chunk, of whole chunks, across 8 s attention blocks and with a one-frame last block: packed
    (every chunk convolved in one call per padding, the blocks' projections together, attention per block), each
    clip's tokens are its own up to a product's last bits; on a CPU, by default, they are its own exactly."""
    encoder, _ = parts
    generator = torch.Generator().manual_seed(7)
    clips = [torch.randn(encoder.config.mel_bins, frames, generator=generator) for frames in (37, 250, 930, 100, 801)]
    with torch.inference_mode():
        alone_ = [encoder(features) for features in clips]
        packed = encoder.encode_many(clips, packed=True)
        by_default = encoder.encode_many(clips)
    for one, together, default in zip(alone_, packed, by_default, strict=True):
        assert together.shape == one.shape and torch.allclose(together, one, rtol=0, atol=1e-5)
        assert torch.equal(default, one)


def test_blocks_attended_padded_in_one_call_give_each_blocks_own_attention():
    """CUDA's way (the blocks padded to the longest, the padding masked out of the keys) against a block at a time."""
    generator = torch.Generator().manual_seed(3)
    lengths = [13, 5, 104, 1, 40]
    query, key, value = (torch.randn(1, 4, sum(lengths), 16, generator=generator) for _ in range(3))
    apart = PackedBlocks(lengths, torch.device("cpu"), padded=False).attend(query, key, value, 0.25)
    together = PackedBlocks(lengths, torch.device("cpu"), padded=True).attend(query, key, value, 0.25)
    assert together.shape == apart.shape == query.shape and torch.allclose(together, apart, rtol=0, atol=1e-6)


def test_prompts_prefilled_together_decode_the_tokens_each_decodes_alone(parts):
    _, decoder = parts
    prompt = case_prompt(parts, ROWS[0][0])
    prompts, budgets = [prompt, prompt[:-4], prompt[:-9]], [12, 1, 7]

    def decoded(rows: GreedyRows, joined: list[tuple[int, list]]) -> list[list[int]]:
        tokens = {row: [emitted.token for emitted in first] for row, first in joined}
        while rows.rows:
            for emitted in rows.step():
                tokens[emitted.row].append(emitted.token)
        return [tokens[row] for row, _ in joined]

    one_by_one, together = rows_of(decoder, static=False), rows_of(decoder, static=False)
    expected = decoded(one_by_one, [one_by_one.join(p, budget) for p, budget in zip(prompts, budgets, strict=True)])
    joined = together.join_many(prompts, budgets, packed=True)
    assert joined[1][1][0].finished and joined[1][0] not in together.rows, "a budget of one ends at the prefill"
    assert decoded(together, joined) == expected and [len(tokens) for tokens in expected] == budgets


def test_the_engine_admits_uploads_together_and_each_gets_its_own_tokens(tiny_transcriber, monkeypatch):
    """Five uploads in one step's admission (encoded and prefilled together), then the same when encoding them
    together fails: one at a time, each with its own tokens."""
    parts = [job(*spec) for spec in PARTS]
    expected = [alone(tiny_transcriber, part) for part in parts]

    def transcribe_all() -> list[list[int]]:
        engine = RecognitionEngine(tiny_transcriber, max_batch_size=5, max_prefills_per_step=5).start()

        async def scenario():
            return await asyncio.gather(*(collect(engine.submit(part)) for part in parts))

        try:
            return [[token.token for token in tokens] for tokens in asyncio.run(scenario())]
        finally:
            engine.stop()

    batches = []
    together = Transcriber.embedded_prompts
    monkeypatch.setattr(Transcriber, "embedded_prompts", lambda self, p: batches.append(len(p)) or together(self, p))
    assert transcribe_all() == expected and max(batches) > 1

    def refused(self, prompts):
        if len(prompts) > 1:
            raise RuntimeError("out of memory")
        return together(self, prompts)

    monkeypatch.setattr(Transcriber, "embedded_prompts", refused)
    assert transcribe_all() == expected
