"""Opening the on-disk caches (embeddings, LLM responses) so that a damaged one never stops a run.

A cache is a cache: when its SQLite file cannot be read (a truncated or overwritten
`cache.db`, "database disk image is malformed"), the directory is moved aside, renamed
`<name>.damaged-<UTC time>`, never deleted, and a new empty cache takes its place, with a
warning that names both paths. The response cache holds answers that were paid for, so the
warning says so and the damaged copy stays for the user to inspect or restore. A cache that can
be read is never replaced: nothing a readable cache still holds is paid for again.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import diskcache

logger = logging.getLogger("ctxr")


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
