"""Who holds a lock on an index: this process, or another one, named by its pid.

The shard's write-ahead log and the run lock (`ctxr.index.run_lock`) are `flock`s. A refused
lock says nothing of its holder, and the holder may be the caller itself: a program that opened
an index for searching and then builds it, or opens it a second way. The kernel lists every
`flock` with its owner's pid in /proc/locks (Linux), keyed by the locked file's device and
inode, so the refusal can say "this process (pid 4242)" or "process 4243" instead of guessing.
Where /proc/locks cannot be read (another system, a locked-down container) the holder is
unknown and the message says "another ctxr process", as it always did.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC_LOCKS = Path("/proc/locks")


def holder_pid(path: Path) -> int | None:
    """The pid that holds a `flock` on `path`, if the system says; None when unknown."""
    try:
        st = os.stat(path)
        lines = PROC_LOCKS.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return None
    inode = str(st.st_ino)
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"; a waiter's line has "->".
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
            continue
        device, _, node = fields[5].rpartition(":")
        if node != inode or _device(device) != (os.major(st.st_dev), os.minor(st.st_dev)):
            continue
        try:
            return int(fields[4])
        except ValueError:
            return None
    return None


def _device(text: str) -> tuple[int, int] | None:
    major, _, minor = text.partition(":")
    try:
        return (int(major, 16), int(minor, 16))
    except ValueError:
        return None


def holder_phrase(path: Path) -> str:
    """Who holds `path`'s lock, as a refusal says it."""
    pid = holder_pid(path)
    if pid is None:
        return "another ctxr process"
    if pid == os.getpid():
        return f"this process (pid {pid})"
    return f"another ctxr process (pid {pid})"


def held_here(path: Path) -> bool:
    return holder_pid(path) == os.getpid()
