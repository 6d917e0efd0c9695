"""Operations settings: logs, graceful shutdown, and the gateway mode that starts the server's worker on
demand."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .group import SettingsGroup


class OperationsSettings(SettingsGroup):
    """Running the server: its logs, its shutdown, and the gateway in front of a worker started on demand."""

    title = "Operations"

    log_format: Literal["json", "text"] = Field("json", description="one JSON object per line, or plain text")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="debug also logs the text")
    shutdown_grace: float = Field(30.0, ge=0, description="seconds in-flight requests get to finish on SIGTERM")
    gateway_mode: bool = Field(False, description="`serve` runs the light gateway, which starts a worker on demand")
    worker_host: str = Field("127.0.0.1", description="where the gateway's worker listens")
    worker_port: int = Field(0, ge=0, le=65535, description="the worker's port; 0 picks a free one")
    worker_start_timeout: float = Field(600.0, gt=0, description="seconds the gateway waits for a worker to be ready")
