"""The fused Triton kernels of the code predictor (model/kernels/) against float64 references on fresh random inputs,
and the fused passes inside the frame step: the same codes as the layer-by-layer passes, and a fallback to them with
one warning when the kernels fail. Without a GPU Triton's interpreter runs the kernels (conftest.py asks for it)."""

from __future__ import annotations

import copy
import logging
import os

import pytest
import torch

pytest.importorskip("triton", reason="the fused kernels need Triton: pip install triton")

from qwen3_tts_server.bench.agreement import forced_predictions, greedy_reference  # noqa: E402
from qwen3_tts_server.model import kernels  # noqa: E402
from qwen3_tts_server.model.layers import Rotary  # noqa: E402
from qwen3_tts_server.model.tts import fused_predictor  # noqa: E402
from qwen3_tts_server.model.tts.fused_predictor import FusedCodePredictor  # noqa: E402
from qwen3_tts_server.model.tts.generation import FrameGenerator  # noqa: E402
from qwen3_tts_server.model.tts.sampling import RowSampling, choose  # noqa: E402
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel  # noqa: E402
from step_schedule import CHINESE, ENGLISH  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# The tests' models are on the CPU: the fused passes run on them through the interpreter only.
on_the_models = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="the test models are on the CPU; test_gpu.py runs them on CUDA"
)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
EPS = 1e-6


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    assert not got.isnan().any()
    return float((got.double().cpu() - want).norm() / want.norm())


def normed(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x.double().cpu()
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * weight.double().cpu()


def operand(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A product's activations as `norm_matmul` feeds them to the matrix units: rounded to the weights' dtype."""
    return x.to(dtype).double()


def rand(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, device=DEVICE).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("m", "n", "k", "blocks"), [(1, 48, 40, None), (3, 40, 72, (16, 16, 16)), (20, 96, 200, None)])
def test_norm_matmul_with_each_epilogue_matches_float64(dtype, m, n, k, blocks):
    """Norm folded into the product (over all of K, however it is tiled), bias and residual added, or SwiGLU."""
    x, weight, bias, residual = (
        rand(m, k, dtype=dtype),
        rand(n, k, dtype=dtype),
        rand(n, dtype=dtype),
        rand(m, n, dtype=dtype),
    )
    norm = (torch.rand(k, device=DEVICE) + 0.5).to(dtype)
    gate_up = rand(2 * n, k, dtype=dtype)
    want = operand(normed(x, norm), dtype) @ weight.double().cpu().T + bias.double().cpu() + residual.double().cpu()
    got = kernels.norm_matmul(x, weight, norm, EPS, bias=bias, residual=residual, blocks=blocks)
    assert got.dtype == dtype and relative(got, want) < TOLERANCE[dtype]
    products = operand(normed(x, norm), dtype) @ gate_up.double().cpu().T
    want = torch.nn.functional.silu(products[:, :n]) * products[:, n:]
    got = kernels.norm_matmul(x, gate_up, norm, EPS, swiglu=True, blocks=blocks)
    assert relative(got, want) < TOLERANCE[dtype]
    got = kernels.norm_matmul(x, weight, out_dtype=torch.float32, blocks=blocks)
    assert got.dtype == torch.float32 and relative(got, x.double().cpu() @ weight.double().cpu().T) < TOLERANCE[dtype]


def reference_attention(qkv, q_norm, k_norm, cos, sin, k_cache, v_cache, start, heads):
    """float64: each new token's queries and keys normed and rotated, its keys and values written to the caches at
    its position, its queries attending causally over the slots so far."""
    rows, kv_heads, _, d = k_cache.shape
    tokens = qkv.shape[0] // rows
    q, k, v = qkv.double().cpu().view(rows, tokens, -1, d).split((heads, kv_heads, kv_heads), dim=2)
    positions = torch.arange(start, start + tokens)

    def rotated(x, weight):
        c, s = cos.double().cpu()[positions][None, :, None], sin.double().cpu()[positions][None, :, None]
        x = normed(x, weight)
        return x * c + x.roll(d // 2, -1) * s

    q, k = rotated(q, q_norm), rotated(k, k_norm)
    keys, values = k_cache.double().cpu().clone(), v_cache.double().cpu().clone()
    keys[:, :, start : start + tokens] = k.transpose(1, 2)
    values[:, :, start : start + tokens] = v.transpose(1, 2)
    out = torch.empty(rows, tokens, heads, d, dtype=torch.float64)
    for t, position in enumerate(positions.tolist()):
        for head in range(heads):
            kv = head // (heads // kv_heads)
            scores = (keys[:, kv, : position + 1] @ q[:, t, head, :, None])[..., 0] * d**-0.5
            out[:, t, head] = (scores.softmax(-1)[..., None] * values[:, kv, : position + 1]).sum(1)
    return out.reshape(rows * tokens, heads * d), keys, values


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("start", "tokens"), [(0, 2), (7, 1), (14, 2)])
def test_attention_over_the_slots_matches_float64(dtype, start, tokens):
    rows, heads, kv_heads, d, slots = 3, 4, 2, 8, 16
    cos, sin = Rotary(d, 1e6).table(slots, torch.float32)
    cos, sin = cos.to(DEVICE), sin.to(DEVICE)
    qkv = rand(rows * tokens, (heads + 2 * kv_heads) * d, dtype=dtype)
    q_norm, k_norm = ((torch.rand(d, device=DEVICE) + 0.5).to(dtype) for _ in range(2))
    k_cache, v_cache = rand(rows, kv_heads, slots, d, dtype=dtype), rand(rows, kv_heads, slots, d, dtype=dtype)
    want, keys, values = reference_attention(qkv, q_norm, k_norm, cos, sin, k_cache, v_cache, start, heads)
    got = kernels.attend(qkv, q_norm, k_norm, cos, sin, k_cache, v_cache, start, heads, EPS)
    assert relative(got, want) < TOLERANCE[dtype]
    assert relative(k_cache, keys) < TOLERANCE[dtype] and relative(v_cache, values) == 0  # the other slots kept


def test_the_sampler_chooses_the_codes_of_the_official_order_and_writes_the_next_input():
    """Temperature, top-k, top-p and the draw (or the argmax) per row, each row with its settings and its number:
    the codes `sampling.choose` takes, including top-k 1, top-p near 0 and rows that do not sample."""
    rows, vocab, hidden = 96, 2048, 24
    logits = torch.randn(rows, vocab, device=DEVICE) * 3
    do_sample = torch.rand(rows, device=DEVICE) < 0.8
    temperature = torch.rand(rows, device=DEVICE) * 1.2 + 0.3
    top_k = torch.randint(0, 100, (rows,), device=DEVICE)
    top_p = torch.rand(rows, device=DEVICE) * 0.9 + 0.1
    top_k[:4], top_p[4:8] = 1, 1e-4
    uniform = torch.rand(rows, dtype=torch.float64, device=DEVICE).clamp(min=1e-9)
    want = choose(logits.clone(), RowSampling(do_sample, temperature[:, None], top_k, top_p[:, None]), uniform)
    codes = torch.full((rows, 3), -1, dtype=torch.long, device=DEVICE)
    table, next_input = (
        torch.randn(vocab, hidden, device=DEVICE),
        torch.full((rows, hidden), float("nan"), device=DEVICE),
    )
    kernels.sample(logits, do_sample, temperature, top_k, top_p, uniform, codes[:, 1], table, next_input)
    assert torch.equal(codes[:, 1], want)
    assert (codes[:, [0, 2]] == -1).all(), "only its column is written"
    assert torch.equal(next_input, table[want])
    assert torch.equal(want[:8][do_sample[:8]], logits[:8].argmax(-1)[do_sample[:8]])  # the cases do bite


def three_rows(model, fused: bool | None, frames: int) -> tuple[dict[int, torch.Tensor], str]:
    """Each row's frames, and the fused passes' state after them."""
    generator = FrameGenerator(model.talker, rows=4, fused=fused)
    generator.add(model.prompts.build(ENGLISH), model.sampling(seed=2), frames, suppress_eos=True)
    generator.add(model.prompts.build(CHINESE), model.sampling().greedy(), frames, suppress_eos=True)
    generator.add(model.prompts.build(ENGLISH), model.sampling(seed=9, top_p=0.5, subtalker_top_k=3), frames)
    made: dict[int, list[torch.Tensor]] = {}
    while generator.active:
        for frame in generator.step():
            made.setdefault(frame.row, []).append(frame.codes.cpu())
    return {row: torch.stack(codes) for row, codes in made.items()}, generator.fused_state


def same_frames(one: dict[int, torch.Tensor], other: dict[int, torch.Tensor]) -> bool:
    return one.keys() == other.keys() and all(torch.equal(one[row], other[row]) for row in one)


@on_the_models
def test_the_fused_passes_make_the_frames_of_the_layer_by_layer_passes(models):
    """float32 weights: every code of every frame, sampled and greedy rows side by side, equal."""
    model = models["custom_voice"]
    plain, state = three_rows(model, fused=False, frames=3)
    assert state == "off (not asked for)"
    fused, state = three_rows(model, fused=True, frames=3)
    assert state == "on" and same_frames(fused, plain)


@on_the_models
def test_a_fused_path_that_fails_or_differs_falls_back_with_one_warning(models, monkeypatch, caplog):
    model = models["custom_voice"]
    plain, _ = three_rows(model, fused=False, frames=2)

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel image for this device")

    with monkeypatch.context() as patched, caplog.at_level(logging.WARNING):
        patched.setattr(kernels, "attend", broken)
        failed, state = three_rows(model, fused=True, frames=2)
    assert state == "failed (RuntimeError: no kernel image for this device)" and same_frames(failed, plain)
    assert len([record for record in caplog.records if "fused code predictor off" in record.message]) == 1
    monkeypatch.setitem(fused_predictor.CHECK_TOLERANCE, torch.float32, 0.0)
    differing, state = three_rows(model, fused=True, frames=2)
    assert state.startswith("failed (FusedMismatch: logits differ by ") and same_frames(differing, plain)


def test_the_fused_passes_are_off_where_they_cannot_run_or_are_not_asked_for(models):
    model = models["custom_voice"]
    auto = FrameGenerator(model.talker, rows=2)
    expected = "on" if DEVICE.type == "cuda" else "off (not on CUDA)"
    assert auto.fused_state == expected
    assert FrameGenerator(model.talker, rows=2, fused=False).fused_state == "off (not asked for)"


@on_the_models
def test_the_fused_predictor_keeps_the_predictors_float32_points_in_bfloat16(models):
    """bfloat16 weights: the fused passes' logits, teacher-forced, within the first-use check's tolerance of the
    layer-by-layer passes'."""
    half = copy.deepcopy(models["custom_voice"].talker.code_predictor).to(torch.bfloat16)
    for embedding in half.model.codec_embedding:
        embedding.output_dtype = torch.bfloat16
    sampling = RowSampling.build([(True, 0.9, 50, 1.0), (False, 1.0, 0, 1.0)], torch.device("cpu"))
    hidden = torch.randn(2, 1, half.model.codec_embedding[0].weight.shape[1]).to(torch.bfloat16)
    uniforms = torch.rand(2, len(half.lm_head), dtype=torch.float64)
    _, worst = fused_predictor.check(FusedCodePredictor(half), half, hidden, hidden.flip(0), sampling, uniforms)
    assert 0 < worst < fused_predictor.CHECK_TOLERANCE[torch.bfloat16]


@on_the_models
def test_teacher_forced_predictions_of_the_fused_passes_are_the_layer_by_layer_ones(models):
    """What the precision benchmark measures of the fused kernels (their argmax along a reference's frames)."""
    model = models["custom_voice"]
    reference = greedy_reference(model, 2)
    assert torch.equal(forced_predictions(model, reference, fused=True), forced_predictions(model, reference))


def test_quantised_weights_keep_the_layer_by_layer_passes(checkpoint_dirs):
    quantised = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], quantize="int8")
    state = FrameGenerator(quantised.talker, rows=2, fused=True).fused_state
    assert state.startswith("off (") and "quantised" in state, state
