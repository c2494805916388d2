"""Memory that returns: a server process gives the pages of its big buffers back when it frees them.

A 5 MB upload passes through several buffers (the body, its compressed copy, the worker's
decompressed copy). glibc serves a block over its mmap threshold (128 KiB at first) from a
mapping of its own and unmaps it when it is freed, but then raises the threshold to that
block's size, so the next uploads' buffers come from the heaps, which keep what they held
(each thread's arena its own). A fixed threshold keeps every big buffer a mapping of its own.
``malloc_trim`` after each job was measured as well and left out: it took 70-660 ms of CPU on a
fragmented heap, for what the fixed threshold alone gives back. Elsewhere than glibc (musl,
macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)
MMAP_THRESHOLD = 1 << 20  # blocks of 1 MiB and over: mapped, unmapped when freed


def fixed_threshold() -> bool:
    """Big blocks mapped apart for this process's life (a forked worker inherits it); ``True``
    when the allocator took it."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not the C library expected: leave the allocator be
        return False
