"""One indexing run per index directory at a time.

Two `ctxr index` runs that start together on a new directory used to race to create the
Qdrant shard, and the loser got a raw rename error whose advice (remove the directory) would
have destroyed the winner's index. The run now takes an exclusive lock on `<index>/.lock`
before it creates or opens anything; a second run is refused at once with a message that names
the directory. The kernel releases the lock with its holder, so a killed run never leaves a
stale one behind. (Where `fcntl` does not exist, Windows, runs are not serialised here; the
shard's own write-ahead-log lock still refuses a second writer.)

The lock file holds nothing: a `.lock` that cannot be opened (a directory of that name, a file
of another user's) is named with what to do, never a raw `OSError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ctxr.errors import IndexError_, IndexInUseError
from ctxr.index.lock_holder import holder_phrase

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


@contextmanager
def index_lock(index_dir: Path) -> Iterator[None]:
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise IndexError_(
            f"the index path {index_dir} is not a directory; pass --index a directory "
            "(a new one is created)"
        ) from None
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    with _open_lock(index_dir / LOCK_NAME) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexInUseError(
                f"the index at {index_dir} is in use by {holder_phrase(index_dir / LOCK_NAME)} "
                "(a running `ctxr index` or a `ctxr watch` update); wait for it to finish, "
                "then retry"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _open_lock(path: Path) -> IO[str]:
    try:
        return open(path, "a+")  # the caller's `with` closes it
    except IsADirectoryError:
        raise IndexError_(
            f"{path} is a directory, where ctxr keeps its (empty) lock file; remove it "
            f"(`rmdir {path}`, or move it away if it holds anything of yours) and retry"
        ) from None
    except OSError as exc:
        raise IndexError_(
            f"cannot open the lock file {path} ({exc.strerror or exc}); make it writable by "
            "this user, or remove it, and retry"
        ) from None
