"""The messages of the server's streaming protocols, declared beside the code that speaks them: each protocol's
module lists what its clients send and what the server sends back (a `WireProtocol`), the documentation's
protocol reference is written from these lists, and each protocol's tests check that what the server sent is
listed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from .errors import InvalidInputError


@dataclass(frozen=True)
class Message:
    name: str  # its `type` (or what tells it apart, for a protocol without one)
    sender: Literal["client", "server"]
    fields: str  # what it carries
    meaning: str  # what it does, or when it comes


@dataclass(frozen=True)
class WireProtocol:
    title: str
    endpoint: str  # where a client connects
    summary: str
    messages: tuple[Message, ...]

    def sent_by(self, sender: Literal["client", "server"]) -> frozenset[str]:
        return frozenset(message.name for message in self.messages if message.sender == sender)


def json_message(text: str | None) -> dict:
    """A client's text message as the JSON object that every JSON socket's messages are."""
    if text is None:
        raise InvalidInputError("messages are JSON text; binary messages are not accepted")
    try:
        message = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise InvalidInputError("invalid JSON: nested too deep") from None
    if not isinstance(message, dict):
        raise InvalidInputError("a message is a JSON object")
    return message
