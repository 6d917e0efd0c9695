"""What this process holds, read from the operating system (no third-party imports: the gateway uses it)."""

from __future__ import annotations

import os


def resident_memory_bytes() -> int | None:
    """This process's resident set size (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
