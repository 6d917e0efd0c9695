"""What this process holds, read from the operating system (no third-party imports: the gateway uses it)."""

from __future__ import annotations

import ctypes
import errno
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


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


@contextmanager
def start_up_objects_kept() -> Iterator[None]:
    """Collect once, then put every object start-up made (modules, tokenizers, the app) out of the garbage
    collector's sight until the block ends. A full collection holds the GIL, and one comes whenever enough objects
    have been made (a model load, a burst of requests): with them in sight it scanned some 360,000 objects, 186 ms
    that the event loop and every stream waited out; now only what came after start-up
    (benchmarks/full_collection.py). At the end they are in sight again for the collection at exit (nanobind, for
    one, reports its objects still alive at exit as leaked)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


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


# Transparent huge pages for what a model holds (HUGE_PAGES). A decode step on a CPU streams every weight once (the
# 0.6B recogniser in w8a8: 0.6 GB, 150,000 pages of 4 KiB, each a TLB miss; 300 pages of 2 MiB). Linux backs memory
# with huge pages only where a program asks, in the transparent_hugepage mode most distributions ship ("madvise"),
# and neither PyTorch's allocator nor fbgemm's packed weights ask. MADV_COLLAPSE (Linux 6.1) moves resident pages
# into huge ones in place, their contents unchanged, whatever that mode (unless "never"), without marking the mapping:
# what is allocated later is not affected.
THP_MODE_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"
PAGE = 4096
HUGE_PAGE = 2 << 20
MADV_COLLAPSE = 25
COLLAPSE_TRIES = 3


def huge_pages_mode() -> str | None:
    """The kernel's transparent huge page mode ("always", "madvise" or "never"); None where it cannot be read."""
    try:
        with open(THP_MODE_FILE) as mode:
            text = mode.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def huge_pages_usable() -> bool:
    """Whether the kernel gives transparent huge pages to a process that asks ("madvise" or "always" mode)."""
    return huge_pages_mode() in ("madvise", "always")


def huge_page_bytes() -> int | None:
    """How much of this process's memory is in transparent huge pages (Linux /proc; None elsewhere). The kernel walks
    every mapping for it: tens of milliseconds in a process holding a model, so not for a probe."""
    try:
        with open("/proc/self/smaps_rollup") as rollup:
            return next(int(line.split()[1]) * 1024 for line in rollup if line.startswith("AnonHugePages:"))
    except (OSError, ValueError, StopIteration):
        return None


def anonymous_mappings(maps: str = "/proc/self/maps") -> list[tuple[int, int]]:
    """(start, end) of this process's private writable anonymous mappings (its heap included) of a huge page or more."""
    found = []
    with open(maps) as lines:
        for line in lines:
            fields = line.split()  # range perms offset dev inode [name]
            start, end = (int(part, 16) for part in fields[0].split("-"))
            anonymous = fields[4] == "0" and (len(fields) == 5 or fields[5] == "[heap]")
            if anonymous and fields[1].startswith("rw") and fields[1][3] == "p" and end - start >= HUGE_PAGE:
                found.append((start, end))
    return found


def resident_windows(start: int, end: int, residency: bytes) -> list[tuple[int, int]]:
    """The runs of whole huge-page windows inside [start, end) whose every page is resident, from `residency` (one
    byte a page from `start`, as mincore gives it: the low bit set where resident). Collapsing only those makes no
    memory resident that was not."""
    runs: list[tuple[int, int]] = []
    window = -(-start // HUGE_PAGE) * HUGE_PAGE
    pages = HUGE_PAGE // PAGE
    while window + HUGE_PAGE <= end:
        first = (window - start) // PAGE
        if all(byte & 1 for byte in residency[first : first + pages]):
            if runs and runs[-1][1] == window:
                runs[-1] = (runs[-1][0], window + HUGE_PAGE)
            else:
                runs.append((window, window + HUGE_PAGE))
        window += HUGE_PAGE
    return runs


@dataclass
class Collapse:
    """What `collapse_into_huge_pages` did: the bytes moved into huge pages, and those the kernel refused by reason
    (ENOMEM: no huge page free, or the memory limit reached; ENOENT/EINVAL: a mapping gone or changed meanwhile)."""

    moved: int = 0
    refused: dict[str, int] = field(default_factory=dict)


def collapse_into_huge_pages() -> Collapse:
    """Move the fully resident huge-page windows of the process's anonymous mappings (`resident_windows`) into huge
    pages (MADV_COLLAPSE). A run of windows the kernel refuses is retried one window at a time, so one window without
    a huge page free does not cost its neighbours; a transient refusal (EAGAIN) is retried. Slow (seconds per
    gigabyte): call it off the serving path."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]

    def refusal(first: int, last: int) -> int:
        """0 where [first, last) was collapsed, else the kernel's errno (EAGAIN retried a few times)."""
        for _ in range(COLLAPSE_TRIES):
            if libc.madvise(first, last - first, MADV_COLLAPSE) == 0:
                return 0
            if (error := ctypes.get_errno()) != errno.EAGAIN:
                return error
        return errno.EAGAIN

    done = Collapse()
    for start, end in anonymous_mappings():
        residency = (ctypes.c_ubyte * ((end - start) // PAGE))()
        if libc.mincore(start, end - start, residency) != 0:  # gone meanwhile
            continue
        for first, last in resident_windows(start, end, bytes(residency)):
            if refusal(first, last) == 0:
                done.moved += last - first
                continue
            for window in range(first, last, HUGE_PAGE):  # those already collapsed succeed again at once
                if error := refusal(window, window + HUGE_PAGE):
                    reason = errno.errorcode.get(error, str(error))
                    done.refused[reason] = done.refused.get(reason, 0) + HUGE_PAGE
                else:
                    done.moved += HUGE_PAGE
    return done
