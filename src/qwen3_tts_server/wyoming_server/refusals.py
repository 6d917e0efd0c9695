"""Errors as Wyoming `error` events: the API's message and error code."""

from __future__ import annotations

from wyoming.error import Error
from wyoming.event import Event

from ..errors import TTSError, error_body


def error_event(error: dict) -> Event:
    """The API's error object as a Wyoming error: its message and its code."""
    return Error(text=error["message"], code=error["code"]).event()


def refusal(exc: TTSError) -> Event:
    return error_event(error_body(exc))
