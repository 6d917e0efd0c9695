"""The Wyoming protocol (Home Assistant's local speech protocol) beside the HTTP API: `describe`, `synthesize` and
streamed synthesis, spoken by the same services (docs/wyoming.md)."""

from .backend import WyomingBackend
from .server import WyomingServer

__all__ = ["WyomingBackend", "WyomingServer"]
