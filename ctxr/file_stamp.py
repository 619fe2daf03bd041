"""A file's stamp: its size, change times and inode, which say whether it changed since it was read.

Two things read every file of something large only to find the few that changed: an update
over an indexed folder (it read and hashed every file: 9 s of a 33 s one-percent update at a
million chunks), and the shard's seal (`ctxr.index.store.seal`: a checksum of every segment file
at each open and close). Both now record each file's stamp beside what they learned from its
content, and pass over a file whose stamp is the same: git's rule for its index (`git status`
trusts size, times and inode the same way), and rsync's quick check.

The stamp is taken before the file is read, so a change during or after the read leaves newer
times than the stamp. A stamp taken within `RACY_NS` of the file's last change is not trusted
(`None`): a second change in the same tick of the filesystem's clock would leave the times as
they were, the case git calls racily clean. Two seconds covers the coarsest common clock (FAT's);
such a file is read again next time, and stamped then. The change time (`st_ctime`) moves on
every write, rename or `touch`, and no program can set it back, so a file restored with its old
modification time (`cp -p`, `rsync -t`, `touch -d`) is still read again. Writes through a
memory mapping move both times too (checked on ext4 and tmpfs).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# A stamp this close to the file's last change is not trusted (module doc).
RACY_NS = 2_000_000_000

Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


def stamp_of(info: os.stat_result, now_ns: int) -> Stamp | None:
    """The stamp of a file stat'ed at `now_ns` (`time.time_ns()`), or None while it is racy."""
    if now_ns - max(info.st_mtime_ns, info.st_ctime_ns) < RACY_NS:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def stamp_file(path: Path) -> Stamp | None:
    """The stamp of the file at `path` now; None while it is racy, or when it cannot be stat'ed
    (the read that follows says what is wrong)."""
    try:
        return stamp_of(os.stat(path), time.time_ns())
    except OSError:
        return None
