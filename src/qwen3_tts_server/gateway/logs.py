"""Logging with the stdlib only: one JSON object per line (LOG_FORMAT=json) or plain text, uvicorn's loggers
included. Extra fields travel in a record's `fields` attribute."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from .asgi import WorkerLost


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),  # as the worker writes it
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", {})
        return line + "".join(f" {name}={value}" for name, value in fields.items()) if fields else line


class DropWorkerLost(logging.Filter):
    """uvicorn logs a traceback for the exception that aborts a response whose worker died; the request's own
    line already says so."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], WorkerLost))


def configure_logging(log_format: str, level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(DropWorkerLost())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per call to the worker would double ours
