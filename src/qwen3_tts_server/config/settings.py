"""`Settings`: every group of settings in one object with flat attributes (`settings.model_id`), read from the
environment, ./.env and the flags given; a bad value's error names its variable."""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict

from ..errors import ConfigurationError
from .cache import CacheSettings
from .engine import EngineSettings
from .group import SettingsGroup
from .live import LiveSettings
from .models import ModelSettings
from .operations import OperationsSettings
from .recognition import RecognitionSettings
from .security import SecuritySettings
from .server import ServerSettings
from .synthesis import SynthesisSettings

SECRET_SHOWN = "********"


class Settings(
    # pydantic orders the fields from the last base to the first: the groups are listed last first, so that the
    # settings read server first in --help, `config` and the settings reference.
    OperationsSettings,
    SecuritySettings,
    CacheSettings,
    LiveSettings,
    RecognitionSettings,
    SynthesisSettings,
    EngineSettings,
    ModelSettings,
    ServerSettings,
):
    """Every setting of every group; no field of its own."""

    title = "Settings"
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True)

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """The environment and .env, then `overrides` (command-line flags); a bad value raises
        ConfigurationError naming its environment variable."""
        try:
            return cls(**{name: value for name, value in overrides.items() if value is not None})
        except ValidationError as exc:
            problems = [
                f"{env_name(str(error['loc'][0]))}={error.get('input')!r}: {error['msg']}" for error in exc.errors()
            ]
            raise ConfigurationError("invalid setting: " + "; ".join(problems)) from None

    def effective(self) -> dict[str, Any]:
        """Every setting by environment variable name, secrets (API keys) masked."""
        values = json.loads(self.model_dump_json())
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                values[name] = SECRET_SHOWN
            elif isinstance(value, list) and any(isinstance(item, SecretStr) for item in value):
                values[name] = [SECRET_SHOWN] * len(value)
        return {env_name(name): value for name, value in values.items()}


# The groups in the order of their fields in Settings.model_fields.
SETTING_GROUPS: tuple[type[SettingsGroup], ...] = tuple(reversed(Settings.__bases__))


def env_name(field: str) -> str:
    return field.upper()
