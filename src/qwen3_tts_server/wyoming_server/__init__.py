"""The Wyoming protocol (Home Assistant's local speech protocol) beside the HTTP API, answered by the same services
(docs/wyoming.md): `describe`, text to speech (`speech.py`) and speech to text (`recognition.py`)."""

from .backend import WyomingBackend
from .server import WyomingServer

__all__ = ["WyomingBackend", "WyomingServer"]
