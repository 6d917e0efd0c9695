"""Float32 and bfloat16 linear layers made batch-invariant (reordered for oneDNN, or row by row when small) give the
plain layers' outputs (to the last bits), skip what they are told to, put everything back when the operators fail,
and give a row the same bits alone and beside any others."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from qwen3_tts_server.model import cpu_linear
from qwen3_tts_server.model.cpu_linear import PrepackedLinear, RowwiseLinear, prepack_linears


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(1024, 1024), nn.GELU(), nn.Sequential(nn.Linear(1024, 32, bias=False)), nn.Linear(32, 8)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 8, 405])
def test_reordered_layers_give_the_plain_outputs(rows, dtype):
    plain = model().to(dtype)
    reordered = model().to(dtype)
    reordered[3].double()  # not the dtype asked for: left as it is
    skipped = reordered[2][0]
    assert prepack_linears(reordered, dtype, skip=(skipped,)) is None
    assert [type(layer).__name__ for layer in (reordered[0], reordered[2][0], reordered[3])] == [
        "PrepackedLinear", "Linear", "Linear",
    ]  # fmt: skip
    assert reordered[2][0] is skipped
    reordered[2][0] = plain[2][0]
    assert prepack_linears(reordered, dtype) is None and isinstance(reordered[2][0], RowwiseLinear)
    plain[3].double()
    x = torch.randn(2, rows, 1024).to(dtype)
    with torch.inference_mode():
        want, got = plain[:3](x), reordered[:3](x)
        assert torch.equal(plain[3](want.double()), reordered[3](want.double()))
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert got.shape == want.shape and torch.allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.fixture
def unchecked_operators():
    """The operators' check (made once per dtype) forgotten before and after the test."""
    cpu_linear.operators_failure.cache_clear()
    yield
    cpu_linear.operators_failure.cache_clear()


@pytest.mark.parametrize("fault", ["missing", "wrong"])
def test_a_missing_or_wrong_operator_leaves_every_layer_as_it_was(monkeypatch, caplog, fault, unchecked_operators):
    layers = model()
    real = torch.ops.mkldnn._reorder_linear_weight

    def reorder(weight, rows):
        if fault == "missing":
            raise RuntimeError("no oneDNN here")
        return real(weight * 2, rows)

    monkeypatch.setattr(cpu_linear.torch.ops.mkldnn, "_reorder_linear_weight", reorder)
    assert ("no oneDNN here" if fault == "missing" else "away from the plain layer") in prepack_linears(layers)
    assert not any(isinstance(layer, PrepackedLinear | RowwiseLinear) for layer in layers.modules())
    assert "not reordered" in caplog.text


@pytest.mark.parametrize(
    ("kind", "width", "dtype"),
    [
        (PrepackedLinear, 3072, torch.float32),
        (RowwiseLinear, 256, torch.float32),
        (PrepackedLinear, 3072, torch.bfloat16),
    ],
)
def test_a_rows_result_is_the_same_alone_and_beside_any_others(kind, width, dtype):
    """Batch invariance: a decode step's row gets the same bits whatever else shares the step (seeded sampling
    depends on it). oneDNN computes a lone row another way, so that layer never runs one alone."""
    torch.manual_seed(0)
    layer = kind(nn.Linear(width, 256, bias=False).to(dtype))
    rows = torch.randn(20, width).to(dtype)
    with torch.inference_mode():
        alone = layer(rows[:1])[0]
        for count in range(2, 21):
            for place in (0, count // 2, count - 1):
                batch = torch.cat([rows[1 : 1 + place], rows[:1], rows[1 + place : count]])
                assert torch.equal(layer(batch)[place], alone), (count, place)
        assert layer(rows[:0]).shape == (0, 256)
        assert layer(rows[:1].reshape(1, 1, width)).shape == (1, 1, 256)
