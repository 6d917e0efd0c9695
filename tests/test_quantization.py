"""QUANTIZE: int8 and int4 weights for the decoder layers (and int8 heads) on a CPU, through the model, `serve`,
`synth` and `bench`; fp8 refused without CUDA; embedding tables kept as the checkpoint stores them."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from qwen3_tts_server.config import Settings
from qwen3_tts_server.errors import ConfigurationError
from qwen3_tts_server.model.device import cpu_multiplies_bfloat16
from qwen3_tts_server.model.layers import Embedding
from qwen3_tts_server.model.quantization import DynamicInt8Linear, Int4Linear, Int8Linear, parse_quantization
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel
from qwen3_tts_server.testing.live_server import live_process, live_server
from qwen3_tts_server.testing.random_checkpoint import make_test_model
from step_schedule import ENGLISH
from test_cli import run

pytestmark = pytest.mark.slow

CPU = torch.device("cpu")


@pytest.mark.parametrize(("layer", "tolerance"), [(Int8Linear, 0.01), (lambda linear: Int4Linear(linear, 32), 0.15)])
def test_quantised_linear_stays_close_to_the_float_one(layer, tolerance):
    """Relative error of y = x W^T + b over a random layer: what 8 and 4 bits allow, far below what a wrong scale
    or zero point gives (several times the output)."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 96, bias=True)
    x = torch.randn(3, 5, 256)
    want = linear(x)
    got = layer(linear)(x)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert ((got - want).norm() / want.norm()).item() < tolerance


def test_int8_multiplies_many_rows_with_its_weights_dequantised_when_asked():
    """From `dense_from_rows` rows on, the layer gives x (scales * W8)^T + b in the input's dtype, or in bfloat16 by
    `dense_dtype`; fewer rows, and int4 (whose packing has no cheap dequantisation), keep the packed kernel."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 96, bias=True)
    layer = Int8Linear(linear)
    x = torch.randn(40, 256)
    packed = layer(x)
    layer.dense_from_rows = 32
    dequantised = layer.weight.float() * layer.scales.float()[:, None]
    assert torch.equal(layer(x), nn.functional.linear(x, dequantised, linear.bias))
    assert torch.equal(layer(x[:31]), packed[:31])  # under the threshold: the packed kernel, as before
    assert ((layer(x) - packed).norm() / packed.norm()).item() < 0.01  # the kernel's bfloat16 input rounding only
    layer.dense_dtype = torch.bfloat16  # the product in bfloat16 (exact int8 values), the scales on its output
    product = nn.functional.linear(x.bfloat16(), layer.weight.bfloat16()).float() * layer.scales.float()
    assert torch.equal(layer(x), product + linear.bias)
    assert ((layer(x) - packed).norm() / packed.norm()).item() < 0.01
    four = Int4Linear(linear, 32)
    before = four(x)
    four.dense_from_rows = 1
    assert torch.equal(four(x), before)


@pytest.mark.parametrize("reduce_range", [False, True])
def test_w8a8_quantises_each_row_alone_whatever_rows_share_the_call(reduce_range):
    """fbgemm quantises a call's whole input with one range: rows of very different sizes (and a row of zeros) give
    bit for bit what each gives alone, stay close to the float layer, and keep int8's weight codes."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 96, bias=True)
    layer = DynamicInt8Linear(linear, reduce_range=reduce_range)
    x = torch.randn(6, 256) * torch.tensor([1.0, 300.0, 1e-3, 0.0, 7.0, 0.5])[:, None]
    together = layer(x)
    alone = torch.cat([layer(x[row : row + 1]) for row in range(len(x))])
    assert torch.equal(together, alone)
    assert torch.equal(layer(x[[4, 1]]), together[[4, 1]])
    want = linear(x)
    assert ((together - want).norm() / want.norm()).item() < (0.02 if reduce_range else 0.01)
    assert torch.equal(together[3], linear.bias.detach())  # a row of zeros: the bias alone
    assert torch.equal(layer.weight, Int8Linear(linear).weight)
    # bfloat16 activations go in as float32 (what the kernel takes) and come back in bfloat16
    assert DynamicInt8Linear(nn.Linear(256, 96, bias=False), reduce_range)(x.bfloat16()).dtype == torch.bfloat16


def test_kept_dense_weights_give_the_converted_product():
    """`keep_dense_weights` stores the dequantised weights a long prefill multiplies (in bfloat16 in oneDNN's layout);
    the product is the same."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 96, bias=True)
    pairs = ((None, torch.float32), (torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16))
    for dense_dtype, dtype in pairs:
        layer = Int8Linear(linear)
        layer.dense_from_rows, layer.dense_dtype = 32, dense_dtype
        x = torch.randn(40, 256).to(dtype)
        converted = layer(x)
        layer.keep_dense_weights(dtype)
        assert layer.dense_weight is not None and layer.dense_weight.dtype == (dense_dtype or dtype)
        assert "dense_weight" in dict(layer.named_buffers())  # counted by memory budgets
        assert layer.dense_weight.is_mkldnn == (dense_dtype is not None)  # bfloat16's reordered for oneDNN once
        assert torch.equal(layer(x), converted)


@pytest.mark.parametrize(
    ("mode", "dtype"), [("int8", "float32"), ("int4", "float32"), ("int4", "bfloat16"), ("w8a8", "bfloat16")]
)
def test_quantised_model_speaks(checkpoint_dirs, models, mode, dtype):
    model = Qwen3TTSModel.load(checkpoint_dirs["custom_voice"], dtype=dtype, quantize=mode)
    assert model.quantization == mode
    kinds = {type(module) for layer in model.talker.model.layers for module in layer.modules()}
    layer_kind = {"int8": Int8Linear, "int4": Int4Linear, "w8a8": DynamicInt8Linear}[mode]
    assert nn.Linear not in kinds and layer_kind in kinds
    assert isinstance(model.talker.codec_head, Int8Linear)
    assert model.talker.dtype == getattr(torch, dtype)  # activations keep the model's dtype
    result = model.generate([ENGLISH], model.sampling(seed=3), max_frames=12, suppress_eos=True)[0]
    audio = model.decode(result.codes)
    assert result.codes.shape == (12, 16) and audio.shape == (12 * 1920,)
    assert np.isfinite(audio).all() and np.sqrt(np.mean(audio**2)) > 0.01
    # Its first logits after the prompt are close to the float32 model's (not equal: another model).
    got, want = (_first_logits(m) for m in (model, models["custom_voice"]))
    assert torch.nn.functional.cosine_similarity(got, want, dim=0) > (0.98 if mode == "int4" else 0.999)


@torch.inference_mode()
def _first_logits(model: Qwen3TTSModel) -> torch.Tensor:
    prompt = model.prompts.build(ENGLISH)
    cache = model.talker.new_cache(1, 256, model.dtype, model.device)
    hidden = model.talker.model.prefill(prompt.prefill[None], cache, slice(0, 1))[0, -1]
    return model.talker.codec_head(hidden).float()


def test_bad_quantization_values_are_clear_errors():
    assert parse_quantization(None, CPU) is None and parse_quantization("none", CPU) is None
    assert parse_quantization(" INT8 ", CPU) == "int8"
    with pytest.raises(ConfigurationError, match="unknown quantization 'int3'; choose one of none, int8, int4, fp8"):
        parse_quantization("int3", CPU)
    with pytest.raises(ConfigurationError, match="fp8 needs a CUDA GPU") as error:
        parse_quantization("fp8", CPU)
    assert error.value.param == "quantize"
    assert parse_quantization("w8a8", CPU) == "w8a8"
    with pytest.raises(ConfigurationError, match="w8a8 runs on a CPU"):
        parse_quantization("w8a8", torch.device("cuda"))


def test_quantize_setting_names_the_variable(clean_env, monkeypatch):
    monkeypatch.setenv("QUANTIZE", "int3")
    with pytest.raises(ConfigurationError, match="QUANTIZE='int3'"):
        Settings.load()
    monkeypatch.setenv("QUANTIZE", "int4")
    assert Settings.load().quantize == "int4"


def test_bfloat16_tables_stay_bfloat16_and_read_exactly(tmp_path):
    """A checkpoint stored in bfloat16 (as published) loaded in float32: its embedding tables are kept as stored
    (the text table memory-mapped from the file) and give exactly the float32 rows; the rest is float32."""
    directory = make_test_model(tmp_path / "m", "tiny")
    weights = load_file(directory / "model.safetensors")
    save_file({key: value.to(torch.bfloat16) for key, value in weights.items()}, directory / "model.safetensors")
    model = Qwen3TTSModel.load(directory)
    stored = load_file(directory / "model.safetensors")
    tables = {name: m for name, m in model.talker.named_modules() if isinstance(m, Embedding)}
    assert len(tables) == 17  # codec, text, and the code predictor's 15
    for name, table in tables.items():
        assert table.weight.dtype == torch.bfloat16 and table.output_dtype == torch.float32
        ids = torch.tensor([0, 5, 17])
        assert torch.equal(table(ids), stored[f"talker.{name}.weight"][ids].float())
    assert model.talker.model.layers[0].mlp.down_proj.weight.dtype == torch.float32  # a small layer: row by row
    audio = model.decode(model.generate([ENGLISH], model.sampling(seed=1), max_frames=4)[0].codes)
    assert np.isfinite(audio).all()


def test_serve_speaks_quantised_and_compiled(checkpoint_dirs):
    import openai

    with live_server(checkpoint_dirs["custom_voice"], "--quantize", "int4", "--torch-compile", "on") as base:
        client = openai.OpenAI(api_key="unused", base_url=f"{base}/v1")
        wav = client.audio.speech.create(model="tts-1", voice="Vivian", input="Quantised and compiled.").content
    audio, rate = sf.read(io.BytesIO(wav))
    assert rate == 24000 and len(audio) >= 2 * 1920
    assert np.sqrt(np.mean(audio**2)) > 0.01


def test_serve_speaks_in_w8a8_by_default_on_a_cpu_and_says_why(checkpoint_dirs):
    """QUANTIZE and DTYPE auto on a CPU: a speech model loads w8a8, with bfloat16 activations where the CPU
    multiplies bfloat16; /health says which and why, and the speech is real."""
    import httpx

    env = {"QUANTIZE": "auto", "DTYPE": "auto"}
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=env) as live:
        spoken = httpx.post(f"{live.base}/v1/audio/speech", json={"input": "By default.", "voice": "ryan"}, timeout=120)
        health = httpx.get(f"{live.base}/health").json()
        model = health["model"]
        log = live.log_tail()
    assert spoken.status_code == 200, spoken.text
    audio, rate = sf.read(io.BytesIO(spoken.content))
    assert rate == 24000 and len(audio) >= 2 * 1920 and np.sqrt(np.mean(audio**2)) > 0.01
    bfloat16 = cpu_multiplies_bfloat16()
    assert (model["quantization"], model["dtype"]) == ("w8a8", "bfloat16" if bfloat16 else "float32")
    assert model["precision"].startswith("QUANTIZE auto on a CPU: w8a8, the fastest precision")
    reason = "(this CPU multiplies bfloat16)" if bfloat16 else "(this CPU has no bfloat16 instructions)"
    assert model["precision"].endswith(reason)
    assert f"{checkpoint_dirs['custom_voice'].name} in {model['dtype']}: {model['precision']}" in log
    # the code predictor's passes traced (TRACED_PREDICTOR's default), from the warm-up's first step
    assert health["traced_predictor"] == "on" and "code predictor traced for 1 rows" in log


def test_serve_refuses_fp8_on_a_cpu_before_it_listens(checkpoint_dirs):
    result = run("serve", "--model", str(checkpoint_dirs["custom_voice"]), "--quantize", "fp8", "--port", "0")
    assert result.returncode != 0
    assert "fp8 needs a CUDA GPU" in result.stderr


def test_synth_and_bench_take_quantize_and_compile(checkpoint_dirs, tmp_path):
    out = tmp_path / "speech.wav"
    model = str(checkpoint_dirs["custom_voice"])
    speak = ("--model", model, "--speaker", "Ryan", "--text", "Hello there.")
    result = run("synth", *speak, "--quantize", "int8", "--compile", "-o", str(out))
    assert result.returncode == 0, result.stderr
    audio, rate = sf.read(out)
    assert rate == 24000 and len(audio) >= 2 * 1920 and np.sqrt(np.mean(audio**2)) > 0.01
    report_path = tmp_path / "bench.json"
    args = ("--concurrency", "1", "2", "--frames", "4", "--out", str(report_path))
    result = run("bench", "--model", model, "--quantize", "int4", "--compile", *args)
    assert result.returncode == 0, result.stderr
    meta = json.loads(report_path.read_text())["meta"]
    assert meta["quantize"] == "int4" and meta["compiled"] is True
    assert 0 < meta["load_seconds"] <= meta["ready_seconds"]
    assert meta["rss_mib_ready"] > 100 and meta["rss_mib_after"] > 100
    result = run("synth", *speak, "--quantize", "fp8", "-o", str(out))
    assert result.returncode != 0 and "fp8 needs a CUDA GPU" in result.stderr
