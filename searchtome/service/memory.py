"""Memory that returns: a server process gives freed memory back to the system.

A 5 MB upload passes through several buffers (the body, its compressed copy, the worker's
decompressed copy). glibc serves a block over its mmap threshold (128 KiB at first) from a
mapping of its own and unmaps it when it is freed, but then raises the threshold to that
block's size, so the next uploads' buffers come from the heaps, which keep what they held
(each thread's arena its own). A fixed threshold keeps every big buffer a mapping of its own.
What smaller objects leave free in the heaps (200 connections' buffers, a job's parsed run) is
returned by ``malloc_trim`` from a thread every :data:`TRIM_SECONDS`: 1-4 ms a call in a web
process during a burst, where a trim after each job or upload would be called hundreds of
times a minute (70-660 ms each on a fragmented heap in process). Elsewhere than glibc (musl,
macOS) nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import sys
import threading
import time
from typing import Any

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)
MMAP_THRESHOLD = 1 << 20  # blocks of 1 MiB and over: mapped, unmapped when freed
TRIM_SECONDS = 5.0
_trimming: set[int] = set()  # the processes whose thread runs (a forked child starts its own)


def _glibc() -> Any:
    """The C library when it is glibc on Linux, else ``None``."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):  # not the C library expected: leave the allocator be
        return None
    return libc


def give_back() -> bool:
    """Fix the threshold and start the trimming thread, once per process; ``True`` when the
    allocator is glibc's and took the threshold."""
    libc = _glibc()
    if libc is None or not libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        return False
    pid = os.getpid()
    if pid not in _trimming:
        _trimming.add(pid)
        threading.Thread(target=_trim, args=(libc,), name="malloc-trim", daemon=True).start()
    return True


def _trim(libc: Any) -> None:
    while True:
        time.sleep(TRIM_SECONDS)
        libc.malloc_trim(0)
