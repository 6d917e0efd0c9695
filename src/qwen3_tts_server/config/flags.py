"""Command-line flags generated from the settings' fields: a --flag for each setting (FLAG_ALIASES adds short
forms), and the settings from the environment with the flags given on top."""

from __future__ import annotations

import argparse
from typing import Any

from .settings import Settings, env_name

FLAG_ALIASES = {"model_id": ["--model"], "unix_socket_path": ["--uds"]}


def add_flags(parser: argparse.ArgumentParser, fields: list[str] | None = None) -> None:
    """A --flag for each setting (or the ones named), defaulting to None so that unset flags leave the
    environment's value; booleans get --flag/--no-flag."""
    for name, info in Settings.model_fields.items():
        if fields is not None and name not in fields:
            continue
        flags = ["--" + name.replace("_", "-"), *FLAG_ALIASES.get(name, [])]
        help_text = f"{info.description} (env {env_name(name)}; default {_shown_default(info.default)})"
        if name == "model_id":
            parser.add_argument(*flags, dest=name, action="append", default=None, metavar="MODEL", help=help_text)
        elif info.annotation is bool:
            parser.add_argument(*flags, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            parser.add_argument(*flags, dest=name, default=None, metavar=env_name(name), help=help_text)


def from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment with the flags that were given on top."""
    return Settings.load(**{name: getattr(args, name, None) for name in Settings.model_fields})


def _shown_default(value: Any) -> str:
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20} MiB"
    return "none" if value is None else str(value)
