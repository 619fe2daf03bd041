"""Giving freed heap back to the operating system (glibc's `malloc_trim`).

glibc keeps the pages of freed allocations mapped, so memory that a native library frees
stays in the process's resident set until something asks for it back. Two such libraries
free a lot at known moments: onnxruntime when its session is dropped (its arena), and
Qdrant's engine when it closes the segment being written (the mutable BM25 postings it held
in memory, about 1.4 kB a point). Measured on 40,000 points: after closing the segment the
process held 123 MiB more anonymous memory than before the writes, after the trim 10 MiB
(docs/explanation/benchmarks.md, "Closed segments' BM25 postings in their files").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys


def return_freed_heap() -> None:
    """Ask glibc to return freed heap pages to the OS; elsewhere, do nothing.

    Other C libraries (musl, macOS's) return large blocks on their own or lack the call."""
    if not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # musl and other C libraries: no malloc_trim
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
