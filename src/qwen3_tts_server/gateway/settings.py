"""The gateway's settings, read from `qwen3-tts-server config --json` in a short-lived subprocess: the same
validation and sources (environment, .env, flags) and the same warnings as `serve`, without pydantic in this
process."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass


class SettingsError(Exception):
    """The settings are invalid; the message is `config`'s own error output."""


@dataclass(frozen=True)
class GatewaySettings:
    host: str
    port: int
    unix_socket_path: str | None
    ssl_keyfile: str | None
    ssl_certfile: str | None
    timeout_keep_alive: float
    idle_timeout: float
    accepted_keys: tuple[str, ...]  # API_KEY and API_KEYS; none: no key is required
    cors_origins: tuple[str, ...]
    shutdown_grace: float
    log_format: str
    log_level: str
    worker_host: str
    worker_port: int
    worker_start_timeout: float
    body_timeout: float
    wyoming_port: int | None  # None: no Wyoming port
    wyoming_host: str | None  # None: the same address as `host`
    wyoming_zeroconf: bool
    max_queue_depth: int  # /health's, while no worker runs to say it

    @classmethod
    def from_effective(cls, values: dict) -> GatewaySettings:
        """From `config --json --show-secrets` output (keys are environment variable names)."""
        fields = {name: values[name.upper()] for name in cls.__dataclass_fields__ if name != "accepted_keys"}
        fields["cors_origins"] = tuple(fields["cors_origins"])
        keys = tuple(key for key in (values["API_KEY"], *values["API_KEYS"]) if key)
        return cls(**fields, accepted_keys=keys)


def load_settings(argv: list[str]) -> tuple[GatewaySettings, list[str]]:
    """The effective settings for these command-line flags, and the warnings `config` printed about them (such as
    an earlier server's variable that is set but ignored), one per line without its `warning: ` prefix."""
    result = subprocess.run(
        [sys.executable, "-m", "qwen3_tts_server", "config", "--json", "--show-secrets", *argv],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SettingsError(result.stderr.strip() or result.stdout.strip() or f"config exited {result.returncode}")
    warnings = [line.removeprefix("warning: ") for line in result.stderr.splitlines() if line.strip()]
    return GatewaySettings.from_effective(json.loads(result.stdout)), warnings
