"""How many live recognition sessions one transcriber serves at once (`LIVE_MAX_SESSIONS`). A machine keeps a
number of live sessions at real time (two on two CPU cores: docs/guides/cpu.md); past it every session falls
behind together. A session takes a slot when it starts and gives it back when it ends; with every slot taken, a new
one is refused at its start. Used on the event loop only."""

from __future__ import annotations

from ...errors import LiveSessionLimitError


class LiveSessionSlots:
    def __init__(self, limit: int = 0):
        self.limit = limit  # 0: no limit
        self.taken = 0

    def take(self) -> None:
        if self.limit and self.taken >= self.limit:
            raise LiveSessionLimitError(
                f"this transcriber serves {self.limit} live session{'s' if self.limit > 1 else ''} at once "
                "(LIVE_MAX_SESSIONS) and all are in use; try again when one ends"
            )
        self.taken += 1

    def give_back(self) -> None:
        self.taken -= 1
