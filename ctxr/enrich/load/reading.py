"""Reading a file's bytes without blocking on what is not a regular file.

The walk yields regular files only, but a file can be replaced between the walk and the read
(by a FIFO, whose open waits for a writer, or a link to ``/dev/zero``, which never ends). The
file is opened without blocking and checked on the open descriptor, so what is read is the
file that was checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ctxr.enrich.load.walk import NOT_REGULAR, display_path
from ctxr.errors import LoadError, SkipFileError


def read_regular(path: Path) -> bytes:
    """The bytes of regular file `path`; a `SkipFileError` for anything else, a `LoadError`
    naming the file when it cannot be read."""
    source = display_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise LoadError(source, f"cannot read ({exc.strerror}); check its permissions") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SkipFileError(source, NOT_REGULAR)
        # A regular file never blocks; clear the flag for ordinary reads all the same.
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        raise LoadError(source, f"cannot read ({exc.strerror}); check its permissions") from exc
    finally:
        os.close(fd)
