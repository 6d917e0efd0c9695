"""What this process holds, read from the operating system (no third-party imports: the gateway uses it)."""

from __future__ import annotations

import ctypes
import os


def resident_memory_bytes() -> int | None:
    """This process's resident set size (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_free_memory() -> None:
    """Hand the memory glibc's allocator holds free back to the system (`malloc_trim`): what a model load or a burst
    of requests leaves free in the threads' arenas stays resident otherwise. Nothing happens without glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def open_descriptors() -> int | None:
    """File descriptors this process has open (Linux /proc; None elsewhere)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def os_threads() -> int | None:
    """Threads of this process, native ones (torch's, the allocator's) included (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
    except (OSError, ValueError, StopIteration):
        return None
