"""A file written whole or not at all: the one way ctxr replaces a file others may read.

Manifests, ledgers, seals, journals and reports are read by other processes (a server beside a
run, the next run after a crash) at any moment, so none may ever be seen half written. The
text goes to a temporary file beside the target, named for the writing process and thread
(two writers never share one), which is then renamed over the target: `os.replace` is atomic
within a filesystem, so a reader sees the old file or the new one. When anything fails (a full
disk, a read-only one) the temporary file is removed and the error raised: the target is as it
was, and each caller decides what the refusal means for it (`ctxr.disk` names it).

The temporary name starts with a dot and ends in `.tmp`, so a reader that lists a folder for
its `*.json` files never takes it for one of them. A process killed while it wrote leaves its
temporary behind (a manifest's can be tens of MB); the next write of the same file removes the
temporaries of processes that no longer run.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading
from pathlib import Path


def temporary_beside(path: Path) -> Path:
    """The temporary file `write_atomically` writes before it renames it over `path`."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def write_atomically(path: Path, data: str | bytes, *, mode: int = 0o666) -> None:
    """Replace `path` with `data` (text is written as UTF-8) whole or not at all; `mode` is the
    new file's permission before the umask (0o600 for a file holding a secret, which is then
    never readable by others, not even for a moment)."""
    tmp = temporary_beside(path)
    body = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    _remove_abandoned(path)


def _remove_abandoned(path: Path) -> None:
    """Remove the temporaries of `path` left by processes that no longer run (killed while they
    wrote). Another live process's, and this one's other threads', may be in flight: kept."""
    try:
        leftovers = list(path.parent.glob(f".{glob.escape(path.name)}.*.*.tmp"))
    except OSError:
        return
    for leftover in leftovers:
        pid = leftover.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, under another user
    return True
