"""What every group of settings shares: the base class of the groups `Settings` is composed of, and the rules for
a value that several groups' settings follow (an empty value unsets; a comma-separated list)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BeforeValidator
from pydantic_settings import BaseSettings


class SettingsGroup(BaseSettings):
    """The settings of one concern. `Settings` inherits every group; the settings reference shows each group's
    settings under its `title`, after its docstring."""

    title: ClassVar[str]


def _none_if_empty(value: Any) -> Any:
    return None if value == "" else value


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# VAR= (or --flag "") unsets an optional setting, also over a value in .env.
EMPTY_UNSETS = BeforeValidator(_none_if_empty)
# A list setting (beside NoDecode, which keeps pydantic-settings from reading it as JSON): A,B from the
# environment or a flag; a list as it is.
COMMA_SEPARATED = BeforeValidator(_split_commas)
