"""Behaviour of generation beyond parity: sampling settings, seeds, budgets, dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qwen3_tts_server.errors import InvalidInputError
from qwen3_tts_server.model.tts.generation import MIN_FRAMES, FrameGenerator, RowRequest
from qwen3_tts_server.model.tts.prompt import SpeechInput
from qwen3_tts_server.model.tts.sampling import RowSampling, choose, stream_uniform
from qwen3_tts_server.model.tts.tts_model import BUDGET_BASE_FRAMES, BUDGET_FRAMES_PER_TOKEN, Qwen3TTSModel

ENGLISH = SpeechInput("Hello world, this is a test of the server.", "English", "Vivian")
CHINESE = SpeechInput("今天天气很好，我们去公园散步吧。", "Chinese", "Serena")


def _codes(model, requests, params, max_frames=16):
    return [r.codes for r in model.generate(requests, params, max_frames=max_frames)]


def test_seeded_sampling_is_reproducible_alone_and_batched(models):
    model = models["custom_voice"]
    alone = _codes(model, [ENGLISH], model.sampling(seed=7))[0]
    again = _codes(model, [ENGLISH], model.sampling(seed=7))[0]
    batched = _codes(model, [CHINESE, ENGLISH], [model.sampling(seed=99), model.sampling(seed=7)])[1]
    other_seed = _codes(model, [ENGLISH], model.sampling(seed=8))[0]
    np.testing.assert_array_equal(alone, again)
    np.testing.assert_array_equal(alone, batched)
    assert not np.array_equal(alone[: len(other_seed)], other_seed[: len(alone)])


def _splitmix64(x: int) -> int:
    """The reference SplitMix64 finaliser on Python integers (unsigned 64-bit)."""
    mask = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def test_row_random_streams_are_splitmix64_of_seed_and_draw():
    """The device-side stream is exactly SplitMix64(SplitMix64(seed) + draw): the same on every device and in
    any batch, with no generator object to carry."""
    seeds = [0, 1, 7, 2**62 + 12345, -3]
    draws = [0, 1, 15, 1000, 3]
    got = stream_uniform(torch.tensor(seeds), torch.tensor(draws)).tolist()
    mask = (1 << 64) - 1
    mixed = [_splitmix64((_splitmix64(s & mask) + d) & mask) for s, d in zip(seeds, draws, strict=True)]
    want = [((z >> 11) + 1) * 2.0**-53 for z in mixed]
    assert got == want
    many = stream_uniform(torch.full((100_000,), 42), torch.arange(100_000))
    assert many.min() > 0 and many.max() <= 1 and abs(many.mean().item() - 0.5) < 0.005


def test_draws_follow_the_warped_distribution():
    """10,000 rows with one set of scores, each drawing once: the frequencies are the softmax of the
    temperature-scaled scores within top-k and top-p, and nothing outside them is ever drawn."""
    rows, scores = 10_000, torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    params = RowSampling.build([(True, 0.8, 4, 0.95)] * rows, torch.device("cpu"))
    uniform = stream_uniform(torch.arange(rows), torch.zeros(rows, dtype=torch.long))
    drawn = choose(scores.expand(rows, -1).clone(), params, uniform)
    counts = torch.bincount(drawn, minlength=6).double() / rows
    expected = (scores[0, :4] / 0.8).softmax(-1).double()  # top-k 4; top-p 0.95 keeps all four here
    assert counts[4:].sum() == 0
    assert torch.allclose(counts[:4], expected, atol=0.015), (counts, expected)
    greedy = RowSampling.build([(False, 0.8, 4, 0.95)] * 3, torch.device("cpu"))
    assert choose(scores.expand(3, -1).clone(), greedy, uniform[:3]).tolist() == [0, 0, 0]


def test_top_k_one_and_tiny_top_p_sample_the_argmax(models):
    model = models["custom_voice"]
    greedy = _codes(model, [ENGLISH], model.sampling().greedy())[0]
    top_k_one = model.sampling(top_k=1, subtalker_top_k=1, temperature=1.3, subtalker_temperature=1.3, seed=1)
    top_p_tiny = model.sampling(top_p=1e-6, subtalker_top_p=1e-6, top_k=0, subtalker_top_k=0, seed=2)
    np.testing.assert_array_equal(_codes(model, [ENGLISH], top_k_one)[0], greedy)
    np.testing.assert_array_equal(_codes(model, [ENGLISH], top_p_tiny)[0], greedy)


def test_sampling_stays_out_of_the_control_range_and_respects_the_minimum(models):
    model = models["voice_design"]
    request = SpeechInput("Short.", "English", instruct="A whisper.")
    for seed in range(6):
        result = model.generate([request], model.sampling(seed=seed, temperature=1.5), max_frames=30)[0]
        assert len(result.codes) >= MIN_FRAMES
        assert result.codes.min() >= 0 and result.codes.max() < 2048


def test_default_budget_grows_with_the_text(models):
    model = models["custom_voice"]
    short = model.prompts.build(SpeechInput("Hi.", "English", "Ryan"))
    long = model.prompts.build(SpeechInput("Hi. " * 50, "English", "Ryan"))
    assert model.frame_budget(short) == BUDGET_BASE_FRAMES + BUDGET_FRAMES_PER_TOKEN * short.text_tokens
    assert model.frame_budget(long) > model.frame_budget(short) + 50 * BUDGET_FRAMES_PER_TOKEN


def test_budget_stop_is_reported_not_silent(models):
    model = models["custom_voice"]
    result = model.generate([CHINESE], model.sampling().greedy(), max_frames=3)[0]
    assert result.finish_reason == "length" and len(result.codes) == 3
    full = model.generate([CHINESE], model.sampling().greedy(), max_frames=200)[0]
    assert full.finish_reason == "eos" and len(full.codes) < 200


def test_rows_join_a_running_batch_at_any_step(models):
    """The step-wise interface: a row added mid-way gets the codes it would get alone."""
    model = models["custom_voice"]
    greedy = model.sampling().greedy()
    alone = _codes(model, [CHINESE], greedy, max_frames=12)[0]
    generator = FrameGenerator(model.talker, rows=2)
    generator.add(model.prompts.build(ENGLISH), greedy, 30)
    for _ in range(5):
        generator.step()
    late = generator.add(model.prompts.build(CHINESE), greedy, 12)
    frames = []
    while late in generator.active:
        frames += [f.codes for f in generator.step() if f.row == late]
    np.testing.assert_array_equal(torch.stack(frames).numpy(), alone)


def test_a_rows_step_has_the_same_bits_alone_and_beside_any_others(models):
    """Batch invariance of the frame step on a CPU: a row's talker state after each step is bitwise the one it has
    alone, whatever rows step beside it (a near tie between two codes would turn the last bits into another code
    for a seeded request under load)."""
    model = models["custom_voice"]
    companions = [CHINESE, SpeechInput("Guten Morgen! Wie geht es dir heute?", "Auto", "Ryan"), ENGLISH]

    def states(others: int) -> torch.Tensor:
        generator = FrameGenerator(model.talker, rows=4)
        row = generator.add(model.prompts.build(ENGLISH), model.sampling(seed=5), 30, suppress_eos=True)
        for index, request in enumerate(companions[:others]):
            generator.add(model.prompts.build(request), model.sampling(seed=9 + index), 30, suppress_eos=True)
        held = []
        for _ in range(12):
            generator.step()
            held.append(generator.hidden[row].clone())
        return torch.stack(held)

    alone = states(0)
    for others in (1, 3):
        assert torch.equal(states(others), alone), f"beside {others} other rows"


def test_prompts_prefilled_together_get_the_bits_each_gets_alone(models):
    """Batched admission: prompts of different lengths prefilled in one padded forward, beside a row already
    running, give each row the cache, state and codes it gets from its own prefill (a seeded request is the same
    alone and in a burst)."""
    model = models["custom_voice"]
    requests = [ENGLISH, CHINESE, SpeechInput("Guten Morgen! Wie geht es dir heute?", "Auto", "Ryan")]
    requests.append(SpeechInput("Short.", "English", "Vivian"))  # far shorter: a CPU attention kernel's sums
    prompts = [model.prompts.build(request) for request in requests]  # would differ if it were padded to the rest
    assert len({p.prefill.shape[0] for p in prompts}) > 2

    def run(together: bool) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        generator = FrameGenerator(model.talker, rows=5)
        generator.add(model.prompts.build(ENGLISH), model.sampling(seed=1), 20, suppress_eos=True)
        generator.step()
        asked = [RowRequest(p, model.sampling(seed=5 + i), 12, suppress_eos=True) for i, p in enumerate(prompts)]
        rows = generator.add_many(asked) if together else [generator.add_many([r])[0] for r in asked]
        firsts = [(generator.hidden[row].clone(), generator.code0[row].clone()) for row in rows]
        codes: dict[int, list[torch.Tensor]] = {row: [] for row in rows}
        while any(row in generator.active for row in rows):
            for frame in generator.step():
                if frame.row in codes:
                    codes[frame.row].append(frame.codes)
        keys = generator.cache.k[:, rows]
        return [
            (hidden, code0, torch.stack(codes[row]), keys[:, slot, :, : p.prefill.shape[0]])
            for slot, (row, (hidden, code0), p) in enumerate(zip(rows, firsts, prompts, strict=True))
        ]

    for alone, together in zip(run(False), run(True), strict=True):
        for want, got in zip(alone, together, strict=True):
            assert torch.equal(want, got)


def test_padded_prefill_attention_agrees_with_the_per_prompt_one(models):
    """The GPU's prefill of several prompts runs attention once over them padded to the longest: the same states and
    cache as attention per prompt, up to rounding."""
    model = models["custom_voice"]
    requests = [ENGLISH, SpeechInput("Short.", "English", "Vivian"), CHINESE]
    prompts = [model.prompts.build(request).prefill for request in requests]
    lengths = [len(p) for p in prompts]
    stack = model.talker.model

    @torch.inference_mode()
    def prefill(padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
        cache = stack.new_cache(4, 64, torch.float32, torch.device("cpu"))
        hidden = stack.prefill_packed(torch.cat(prompts), lengths, cache, [3, 0, 2], padded=padded)
        return hidden, cache.k[:, [3, 0, 2], :, : max(lengths)]

    (want, want_keys), (got, got_keys) = prefill(False), prefill(True)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for slot, length in enumerate(lengths):
        torch.testing.assert_close(got_keys[:, slot, :, :length], want_keys[:, slot, :, :length], rtol=1e-5, atol=1e-5)


def test_removed_row_frees_its_slot_without_disturbing_the_others(models):
    model = models["custom_voice"]
    greedy = model.sampling().greedy()
    alone = _codes(model, [ENGLISH], greedy, max_frames=10)[0]
    generator = FrameGenerator(model.talker, rows=2)
    kept = generator.add(model.prompts.build(ENGLISH), greedy, 10)
    dropped = generator.add(model.prompts.build(CHINESE), greedy, 10)
    frames = [f.codes for f in generator.step() if f.row == kept]
    generator.remove(dropped)
    assert generator.active == [kept] and generator.free_rows() == [dropped]
    reused = generator.add(model.prompts.build(CHINESE), greedy, 3)
    assert reused == dropped
    while kept in generator.active:
        frames += [f.codes for f in generator.step() if f.row == kept]
    np.testing.assert_array_equal(torch.stack(frames).numpy(), alone)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_loads_and_speaks(checkpoint_dirs, dtype):
    model = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], dtype=dtype)
    assert model.talker.codec_head.weight.dtype == getattr(torch, dtype)
    result = model.generate([ENGLISH], model.sampling(seed=0), max_frames=6)[0]
    audio = model.decode(result.codes)
    assert audio.dtype == np.float32 and audio.shape == (len(result.codes) * 1920,)
    assert np.isfinite(audio).all() and np.sqrt(np.mean(audio**2)) > 0.01


@pytest.mark.parametrize(
    "override",
    [{"temperature": 0}, {"top_p": 0}, {"top_p": 1.5}, {"top_k": -1}, {"repetition_penalty": 0}],
)
def test_bad_sampling_settings_are_rejected(models, override):
    with pytest.raises(InvalidInputError, match=next(iter(override))):
        models["custom_voice"].sampling(**override)


def test_code_predictor_rotates_in_float32_under_bfloat16_weights(checkpoint_dirs):
    """The predictor's q/k norm and rotation stay in float32 with bfloat16 weights (rounding them to bfloat16
    first is what cost peers quality): its queries and keys are closer to a float32 computation on the same
    weights than rotating in the weights' own dtype gets them."""
    model = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], dtype="bfloat16")
    stack = model.talker.code_predictor.model
    assert stack.rotary_float32 and not model.talker.model.rotary_float32
    attention = stack.layers[0].self_attn
    x = torch.randn(4, 3, stack.cfg.hidden_size, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    cos32, sin32 = stack.rotary.span(0, 3, torch.float32)
    attention.project(x, cos32, sin32)  # fuses the projections
    # The reference: the same bfloat16 weights, everything computed in float32.
    heads, head_dim = attention.heads + attention.kv_heads, attention.head_dim
    qk = (x.float() @ attention.qkv_proj.weight.float().T)[..., : heads * head_dim].view(4, 3, heads, head_dim)
    qk = attention.qk_norm_weight.float() * torch.nn.functional.rms_norm(qk, (head_dim,), eps=attention.eps)
    qk = qk.transpose(1, 2)
    want = qk * cos32 + qk.roll(head_dim // 2, dims=-1) * sin32

    def error() -> float:
        q, k, _ = attention.project(x, *stack.rotary.span(0, 3, stack.rotary_dtype(torch.bfloat16)))
        return (torch.cat((q, k), dim=1).float() - want).abs().mean().item()

    in_float32 = error()
    stack.rotary_float32 = False
    in_bfloat16 = error()
    assert in_float32 < 0.8 * in_bfloat16, (in_float32, in_bfloat16)
