"""Every setting of the server in one place: environment variables (the earlier server's names), an optional
`.env` file, and matching command-line flags generated from the same fields. Light on purpose (no torch): the
gateway process reads it too.

The settings are grouped by concern, one module each (server, models, engine, synthesis, recognition, live
transcription, cache, security, operations), each group a class of its fields and their validators; `Settings`
inherits them all, so every setting stays a flat attribute (`settings.model_id`). The settings reference shows
them by group (`SETTING_GROUPS`)."""

from .engine import CPU_BATCH_SIZE, GPU_BATCH_SIZE, parse_cores
from .flags import FLAG_ALIASES, add_flags, from_args
from .group import SettingsGroup
from .models import DEFAULT_MODEL, model_id_of, parse_bytes
from .recognition import MAX_TRANSCRIPTION_BYTES, MAX_TRANSCRIPTION_SECONDS
from .settings import SETTING_GROUPS, Settings, env_name
from .synthesis import DEFAULT_EMIT_FRAMES, MAX_REQUEST_FRAMES
from .unsupported import UNSUPPORTED_VARIABLES, unsupported_variable_warnings

__all__ = [
    "CPU_BATCH_SIZE",
    "DEFAULT_EMIT_FRAMES",
    "DEFAULT_MODEL",
    "FLAG_ALIASES",
    "GPU_BATCH_SIZE",
    "MAX_REQUEST_FRAMES",
    "MAX_TRANSCRIPTION_BYTES",
    "MAX_TRANSCRIPTION_SECONDS",
    "SETTING_GROUPS",
    "UNSUPPORTED_VARIABLES",
    "Settings",
    "SettingsGroup",
    "add_flags",
    "env_name",
    "from_args",
    "model_id_of",
    "parse_bytes",
    "parse_cores",
    "unsupported_variable_warnings",
]
