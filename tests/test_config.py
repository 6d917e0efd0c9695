"""Settings: environment variables with the earlier server's names, ./.env, command-line flags on top,
errors naming the variable, and `qwen3-tts-server config` printing the effective values, the key masked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwen3_tts_server.cli import build_parser
from qwen3_tts_server.config import (
    DEFAULT_MODEL,
    SETTING_GROUPS,
    UNSUPPORTED_VARIABLES,
    Settings,
    from_args,
    unsupported_variable_warnings,
)
from qwen3_tts_server.errors import ConfigurationError

SEED_NAMES = [
    "MODEL_ID",
    "DEVICE",
    "DTYPE",
    "IDLE_TIMEOUT",
    "PRELOAD_MODEL",
    "REQUEST_TIMEOUT",
    "MAX_QUEUE_DEPTH",
    "MAX_BATCH_SIZE",
    "AUDIO_CACHE_MAX",
    "VOICE_CACHE_MAX",
    "LOG_FORMAT",
    "TEXT_NORMALIZE",
    "API_KEY",
    "DATA_DIR",
    "UNIX_SOCKET_PATH",
    "REDIS_URL",
    "GATEWAY_MODE",
    "WORKER_HOST",
    "WORKER_PORT",
]


def run_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k.lower() not in Settings.model_fields}
    return subprocess.run(
        [sys.executable, "-m", "qwen3_tts_server", *args],
        env={**base, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_earlier_servers_names_are_all_settings():
    assert set(SEED_NAMES) <= set(Settings().effective())
    assert all(info.description for info in Settings.model_fields.values())


def test_settings_are_the_fields_of_their_groups():
    """Each setting belongs to exactly one group, `Settings` has no field of its own, and its fields come group by
    group in SETTING_GROUPS' order (the order of --help, `config` and the settings reference)."""
    assert list(Settings.model_fields) == [name for group in SETTING_GROUPS for name in group.model_fields]


def test_environment_then_dotenv_then_flags(clean_env, tmp_path):
    (tmp_path / ".env").write_text("MAX_QUEUE_DEPTH=3\nIDLE_TIMEOUT=9\nLOG_FORMAT=text\n")
    clean_env.setenv("IDLE_TIMEOUT", "5")  # the environment wins over .env
    settings = Settings.load()
    assert (settings.max_queue_depth, settings.idle_timeout, settings.log_format) == (3, 5.0, "text")
    args = build_parser().parse_args(["serve", "--idle-timeout", "7", "--no-text-normalize", "--uds", "/tmp/s"])
    flagged = from_args(args)  # flags win over both
    assert (flagged.idle_timeout, flagged.text_normalize, flagged.max_queue_depth) == (7.0, False, 3)
    assert str(flagged.unix_socket_path) == "/tmp/s"


def test_an_empty_value_unsets_an_optional_setting(clean_env, tmp_path):
    (tmp_path / ".env").write_text("UNIX_SOCKET_PATH=/run/tts.sock\nREDIS_URL=redis://cache:6379/0\n")
    clean_env.setenv("UNIX_SOCKET_PATH", "")
    settings = Settings.load(redis_url="")
    assert settings.unix_socket_path is None and settings.redis_url is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("IDLE_TIMEOUT", "soon"),
        ("IDLE_TIMEOUT", "-1"),
        ("MAX_QUEUE_DEPTH", "-1"),
        ("INFERENCE_CPU_CORES", "3-1"),
        ("PORT", "70000"),
        ("LOG_FORMAT", "xml"),
        ("DTYPE", "int4"),
        ("PRELOAD_MODEL", "maybe"),
        ("AUDIO_CACHE_MAX_BYTES", "0"),
    ],
)
def test_a_bad_value_names_its_variable(clean_env, name, value):
    clean_env.setenv(name, value)
    with pytest.raises(ConfigurationError, match=f"{name}='{value}'"):
        Settings.load()


def test_quantize_auto_is_w8a8_on_a_cpu_and_says_why(clean_env):
    """QUANTIZE's default for speech models and transcribers: none on a GPU; w8a8 on a CPU, its activations in
    bfloat16 where DTYPE is auto and the CPU multiplies bfloat16. Set values stay as set. Each says why."""
    settings = Settings.load()
    assert settings.quantize == "auto" and settings.resolved_quantization() is None  # a ForcedAligner's

    def chosen(settings: Settings, device: str, bfloat16: bool) -> tuple[str, str | None]:
        precision = settings.precision(device, bfloat16)
        return precision.dtype, precision.quantize

    assert chosen(settings, "cpu", True) == ("bfloat16", "w8a8")
    assert chosen(settings, "cpu", False) == ("float32", "w8a8")
    assert chosen(settings, "cuda", True) == ("bfloat16", None)
    assert chosen(Settings.load(dtype="float32"), "cpu", True) == ("float32", "w8a8")
    assert chosen(Settings.load(quantize="int8"), "cpu", True) == ("float32", "int8")
    assert chosen(Settings.load(quantize="none"), "cpu", True) == ("float32", None)
    assert "bfloat16 activations (this CPU multiplies bfloat16)" in settings.precision("cpu", True).why
    assert "(this CPU has no bfloat16 instructions)" in settings.precision("cpu", False).why
    assert "(DTYPE float32)" in Settings.load(dtype="float32").precision("cpu", True).why
    assert settings.precision("cuda", True).why == "DTYPE auto (bfloat16), QUANTIZE auto (none off a CPU)"
    assert Settings.load(quantize="int8").precision("cpu", True).why == "DTYPE auto (float32), QUANTIZE int8"


def test_model_commands_resolve_dtype_and_quantize_as_serve_does(clean_env):
    """`synth`, `bench` and `transcribe`: each of --dtype and --quantize, else its variable, else auto."""
    from argparse import Namespace

    from qwen3_tts_server.cli_precision import flag_precision, flag_settings
    from qwen3_tts_server.model.device import cpu_multiplies_bfloat16

    def chosen(dtype: str | None, quantize: str | None, device: str = "cpu") -> tuple[str, str | None]:
        precision = flag_precision(flag_settings(Namespace(dtype=dtype, quantize=quantize)), device)
        return precision.dtype, precision.quantize

    assert chosen(None, None) == ("bfloat16" if cpu_multiplies_bfloat16() else "float32", "w8a8")
    assert chosen(None, None, "cuda:0") == ("bfloat16", None)
    assert chosen("float32", "none") == ("float32", None)
    clean_env.setenv("QUANTIZE", "int8")
    clean_env.setenv("DTYPE", "bfloat16")
    assert chosen(None, None) == ("bfloat16", "int8")
    assert chosen("float32", "w8a8") == ("float32", "w8a8")


def test_config_command_masks_the_key_and_prints_every_setting(tmp_path):
    env = {"API_KEY": "sk-very-secret", "IDLE_TIMEOUT": "30", "GATEWAY_MODE": "true"}
    lines = run_cli("config", "--max-batch-size", "8", env=env, cwd=tmp_path)
    assert lines.returncode == 0, lines.stderr
    printed = dict(line.split("=", 1) for line in lines.stdout.splitlines() if not line.startswith("#"))
    assert set(printed) == set(Settings().effective())
    hosted = [line for line in lines.stdout.splitlines() if line.startswith("#")]
    assert hosted == [f"# hosted: {DEFAULT_MODEL} from {DEFAULT_MODEL}"]  # MODEL_ID alone: MODELS is unset
    assert printed["API_KEY"] == "********" and "sk-very-secret" not in lines.stdout
    assert (printed["IDLE_TIMEOUT"], printed["GATEWAY_MODE"], printed["MAX_BATCH_SIZE"]) == ("30.0", "True", "8")
    as_json = run_cli("config", "--json", env=env, cwd=tmp_path)
    assert json.loads(as_json.stdout)["API_KEY"] == "********"


def test_config_command_fails_naming_the_variable(tmp_path):
    result = run_cli("config", env={"MAX_BATCH_SIZE": "lots"}, cwd=tmp_path)
    assert result.returncode == 2 and "MAX_BATCH_SIZE='lots'" in result.stderr and not result.stdout


def test_serve_refuses_a_bad_setting_before_loading_anything(tmp_path):
    result = run_cli("serve", env={"REQUEST_TIMEOUT": "forever"}, cwd=tmp_path)
    assert result.returncode == 2 and "REQUEST_TIMEOUT='forever'" in result.stderr


def test_every_setting_has_a_documented_serve_flag():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    flags = {action.dest: action for action in serve._actions}
    for name in Settings.model_fields:
        assert name in flags and name.upper() in flags[name].help, name


def test_the_earlier_servers_ignored_variables_are_named_when_set():
    environ = {"WARMUP_TEXTS": "Hello|Hi", "VAD_TRIM": "", "QUANTIZE": "int8", "PORT": "8000"}
    lines = unsupported_variable_warnings(environ)
    assert [line.split()[0] for line in lines] == ["WARMUP_TEXTS"]  # VAD_TRIM= is not set; QUANTIZE is honoured
    assert "warmed up" in lines[0]  # with why it is not needed
    assert not {name.lower() for name in UNSUPPORTED_VARIABLES} & set(Settings.model_fields)


def test_config_command_warns_of_an_ignored_variable(tmp_path):
    result = run_cli("config", "--json", env={"VAD_TRIM": "true"}, cwd=tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout)
    assert result.stderr.startswith("warning: VAD_TRIM is set but ignored")
