"""Logging for the whole process: one JSON object per line (LOG_FORMAT=json) or plain text, uvicorn's own
loggers included, and the current request's id on every line logged while it is handled."""

from __future__ import annotations

import contextvars
import logging
import logging.config
from typing import Any

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Adds the current request's id; drops uvicorn's terminal-coloured copy of the message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        record.__dict__.pop("color_message", None)
        return True


def logging_config(log_format: str = "json", level: str = "info") -> dict[str, Any]:
    """A dictConfig for the root logger and uvicorn's loggers (also passed to uvicorn as its log_config)."""
    if log_format == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger", "message": "msg"},
            "timestamp": "ts",  # ISO 8601, UTC
            "json_ensure_ascii": False,
        }
    else:
        formatter = {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"}
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "default",
        "filters": ["request_id"],
        "stream": "ext://sys.stderr",
    }
    uvicorn = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": level.upper()},
        "loggers": {"uvicorn": uvicorn, "uvicorn.error": {"level": level.upper()}, "uvicorn.access": uvicorn},
    }


def configure_logging(log_format: str = "json", level: str = "info") -> dict[str, Any]:
    config = logging_config(log_format, level)
    logging.config.dictConfig(config)
    return config
