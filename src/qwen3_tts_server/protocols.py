"""The messages of the server's streaming protocols, declared beside the code that speaks them: each protocol's
module lists what its clients send and what the server sends back (a `WireProtocol`), the documentation's
protocol reference is written from these lists, and each protocol's tests check that what the server sent is
listed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
