"""Opening the on-disk caches (embeddings, LLM responses) so that a damaged one never stops a run.

A cache is a cache: when its SQLite file cannot be read (a truncated or overwritten
`cache.db`, "database disk image is malformed"), the directory is moved aside, renamed
`<name>.damaged-<UTC time>`, never deleted, and a new empty cache takes its place, with a
warning that names both paths. The response cache holds answers that were paid for, so the
warning says so and the damaged copy stays for the user to inspect or restore. A cache that can
be read is never replaced: nothing a readable cache still holds is paid for again.

Only damage sets a cache aside. An operational error (a full disk, "database or disk is full";
a read-only one; a lock held too long) says nothing about the file: it is a `StorageError`
naming the path and the space free, and the cache stays where it is, whole. Writes name a full
disk the same way (`cache_write`), and every entry written before stays readable.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import diskcache

from ctxr.disk import free_bytes, refusal, size_text, storage_error
from ctxr.errors import StorageError

logger = logging.getLogger("ctxr")

# Below this, SQLite's "disk I/O error" on opening is the disk having no room for its files.
NEARLY_FULL_BYTES = 2**20
# What SQLite says of a file that is not a sound database; anything else is not damage.
_DAMAGE_TEXT = ("malformed", "not a database", "file is encrypted", "corrupt")


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether a SQLite error says the file is damaged (not the disk or a lock refusing)."""
    if refusal(exc) is not None:
        return False
    text = str(exc).lower()
    if any(t in text for t in _DAMAGE_TEXT):
        return True
    # Plain DatabaseError (not Operational, Integrity...) is SQLite's voice for a bad file.
    return type(exc) is sqlite3.DatabaseError


def open_cache(
    directory: Path, what: str, *, paid: bool = False, **options: Any
) -> diskcache.Cache:
    """A diskcache at `directory`; a damaged one is moved aside and replaced (see module doc).
    `what` names the cache in the warning; `paid` says that its entries cost money."""
    cache = None
    try:
        cache = diskcache.Cache(str(directory), **options)
        cache.get("\x00probe")  # a read: some damage only shows when a page is touched
        return cache
    except sqlite3.DatabaseError as exc:
        if cache is not None:
            cache.close()
        if not is_damage(exc):
            raise _refused(directory, what, exc) from exc
        aside = directory.with_name(
            f"{directory.name}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        )
        directory.rename(aside)
        cost = (
            "; its answers were paid for: the damaged copy is kept there (restore it from a "
            "backup to reuse them), and contexts it held are asked for again"
            if paid
            else "; its entries are recomputed as needed"
        )
        logger.warning(
            f"the {what} at {directory} could not be read ({exc}): moved to {aside}{cost}"
        )
        return diskcache.Cache(str(directory), **options)
    except OSError as exc:  # the directory or its files cannot be made (full, read-only)
        if cache is not None:
            cache.close()
        raise _refused(directory, what, exc) from exc


@contextmanager
def cache_write(directory: Path, what: str) -> Iterator[None]:
    """Around a write to a cache: a disk that refuses it is a `StorageError` naming the path
    and the space free; what the cache held before stays (SQLite rolls back only this write)."""
    try:
        yield
    except (sqlite3.OperationalError, OSError) as exc:
        if refusal(exc) is None:
            raise
        raise _refused(directory, what, exc) from exc


def _refused(directory: Path, what: str, exc: BaseException) -> StorageError:
    kind = refusal(exc)
    if kind is None and "disk i/o error" in str(exc).lower() and _nearly_full(directory):
        kind = "full"  # SQLite could not make its -wal/-shm files: no room for them
    if kind is not None:
        return storage_error(directory, what, kind, detail=str(exc))
    return StorageError(
        f"the {what} at {directory} cannot be opened ({exc}; {size_text(free_bytes(directory))} "
        "free there); it is not damaged and was left "
        "as it is: make sure no other program holds it and that this user may write there, "
        "then run the command again",
        str(directory),
    )


def _nearly_full(directory: Path) -> bool:
    free = free_bytes(directory)
    return free is not None and free < NEARLY_FULL_BYTES
