"""Shared fixtures: random-weight checkpoints built once per session (never a hub)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The recognisers the tests host stay in float32, the precision their parity fixtures were recorded in: QUANTIZE's
# default (auto) would quantise a transcriber on a CPU. Tests of that default set QUANTIZE=auto themselves.
os.environ.setdefault("QUANTIZE", "none")
# Nor do the servers the tests start move their process's memory into huge pages after each load (HUGE_PAGES' default
# on a CPU): seconds of kernel work over a test worker's whole memory, beside timed probes. tests/test_huge_pages.py
# runs it itself.
os.environ.setdefault("HUGE_PAGES", "off")
# Parallel workers (pytest-xdist) share the cores: each takes its share as torch threads rather than all of them
# (OpenMP threads waiting for work spin against the other workers'), and the servers a test starts inherit it.
if workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // int(workers))))

import torch  # noqa: E402

# Without a GPU, Triton's interpreter runs the fused kernels (model/kernels/) on the CPU: it must be asked for
# before they are defined, and the servers the tests start inherit it (their FUSED_KERNELS=auto still stays off).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from pydantic import AliasChoices  # noqa: E402

from asr_cases import ASR_CHECKPOINTS  # noqa: E402
from parity_cases import CHECKPOINTS  # noqa: E402
from qwen3_tts_server.config import Settings  # noqa: E402
from qwen3_tts_server.model.tts.tts_model import Qwen3TTSModel  # noqa: E402
from qwen3_tts_server.testing.random_asr_checkpoint import make_asr_test_model  # noqa: E402
from qwen3_tts_server.testing.random_checkpoint import make_test_model  # noqa: E402
from redis_server import redis_server  # noqa: E402, F401 (a fixture for every test module)


@pytest.fixture(scope="session")
def checkpoint_dirs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("checkpoints")
    return {name: make_test_model(root / name, **spec) for name, spec in CHECKPOINTS.items()}


@pytest.fixture(scope="session")
def models(checkpoint_dirs) -> dict[str, Qwen3TTSModel]:
    return {name: Qwen3TTSModel.load(path) for name, path in checkpoint_dirs.items()}


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No setting from the caller's environment (under its name or an alias such as MAX_NEW_TOKENS), and a
    working directory without a .env."""
    for name, field in Settings.model_fields.items():
        aliases = field.validation_alias.choices if isinstance(field.validation_alias, AliasChoices) else []
        for variable in {name, *map(str, aliases)}:
            monkeypatch.delenv(variable.upper(), raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


@pytest.fixture(scope="session")
def both_families(tmp_path_factory) -> dict:
    """A tiny speech model (CustomVoice), a tiny transcriber and a tiny ForcedAligner, for one server of both."""
    root = tmp_path_factory.mktemp("both_families")
    return {
        "speech": make_test_model(root / "speech", "tiny", "custom_voice"),
        "asr": make_asr_test_model(root / "asr", **ASR_CHECKPOINTS["asr"]),
        "aligner": make_asr_test_model(root / "aligner", **ASR_CHECKPOINTS["forced_aligner"]),
    }


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked `slow` run first (in their own order, stable), so that parallel workers, each given whole
    modules, do not end with one of them still running a long module alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
