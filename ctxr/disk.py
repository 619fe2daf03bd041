"""A disk that refuses a write (full, read-only) is named as such, never taken for damage.

A full filesystem shows up in many voices: `OSError` ENOSPC from Python, SQLite's "database or
disk is full" (an `sqlite3.OperationalError`), qdrant-edge's "No space left on device (os error
28)" inside a binding error. Each is turned into a `StorageError` that names the path, what it
holds, the space free there and, where known, the space needed; a damaged file is a different
error with a different fix (`ctxr doctor --repair`), and the two must never be confused: the
fix for damage sets files aside, which on a full disk would lose nothing but time, and for a
cache of paid answers would lose money.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from ctxr.errors import StorageError

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_UNWRITABLE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
# How the full and read-only disks read inside messages that carry no errno (Rust, SQLite).
_FULL_TEXT = (
    "no space left on device",
    "database or disk is full",
    "disk quota exceeded",
    "os error 28)",
    "os error 122)",
)
_UNWRITABLE_TEXT = (
    "read-only file system",
    "readonly database",
    "attempt to write a readonly",
    "os error 30)",
)


def refusal(exc: BaseException) -> str | None:
    """`"full"` or `"read-only"` when `exc` (or what it was raised from) is a disk refusing a
    write, else None. Permission errors count as read-only only with an errno (a binding's
    "permission denied" could be anything)."""
    seen: BaseException | None = exc
    for _ in range(5):  # the exception and a few of its causes
        if seen is None:
            break
        number = getattr(seen, "errno", None) if isinstance(seen, OSError) else None
        if number in _FULL_ERRNOS:
            return "full"
        if number in _UNWRITABLE_ERRNOS:
            return "read-only"
        text = str(seen).lower()
        if any(t in text for t in _FULL_TEXT):
            return "full"
        if any(t in text for t in _UNWRITABLE_TEXT):
            return "read-only"
        seen = seen.__cause__ or seen.__context__
    return None


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the filesystem holding `path` (its nearest existing parent)."""
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def size_text(n: int | None) -> str:
    if n is None:
        return "an unknown amount"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def storage_error(
    path: Path, what: str, kind: str = "full", needed: int | None = None, detail: str = ""
) -> StorageError:
    """The error for a disk that refused a write to `path`, which holds `what`."""
    free = free_bytes(path)
    because = f" ({detail})" if detail else ""
    if kind == "read-only":
        message = (
            f"cannot write the {what} at {path}: the filesystem is read-only or not writable "
            f"by this user{because}; make it writable, or point ctxr elsewhere (--index, "
            "CTXR_CACHE_DIR), and run the command again. Nothing was damaged"
        )
    else:
        need = f", about {size_text(needed)} needed" if needed is not None else ""
        message = (
            f"the disk holding the {what} at {path} is full ({size_text(free)} free{need})"
            f"{because}; free some space, or point ctxr elsewhere (--index, CTXR_CACHE_DIR), "
            "and run the command again. Nothing was damaged, and every answer already "
            "received is kept"
        )
    return StorageError(message, str(path), free)


def check_free(path: Path, needed: int, what: str) -> None:
    """Raise `StorageError` before writing when the filesystem holding `path` has less than
    `needed` bytes free: nothing has been written or paid for yet."""
    free = free_bytes(path)
    if free is None or free >= needed:
        return
    raise StorageError(
        f"not enough space for this run on the disk holding the {what} at {path}: "
        f"{size_text(free)} free, about {size_text(needed)} needed (what the run would "
        "write, estimated, plus CTXR_MIN_FREE_MB of headroom); free some space, or point "
        "ctxr elsewhere (--index, CTXR_CACHE_DIR), and run it again. Nothing was written "
        "or paid for",
        str(path),
        free,
    )
