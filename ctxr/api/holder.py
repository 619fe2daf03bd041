"""The app's one search service, or why there is none, kept in step with the index on disk.

The index can change under a running server: deleted, replaced by a new `ctxr index` into the
same path (the shard lock went with the old directory, so nothing stops it), or held by another
process when the server starts. The holder notices on `/health` and, at most once a
`CHECK_SECONDS`, on requests, by comparing the identity of the index directory, its shard and
its manifest (device, inode, and the manifest's size and mtime) with what it opened:

- deleted: the service is closed and every request answers 503 saying so;
- replaced or rewritten: the old service is retired and the new index opened; until it opens
  (a `ctxr index` may still hold it) requests answer 503 with the reason;
- not open (missing, in use, damaged): opening is retried, at most once a `RETRY_SECONDS`, so
  a second server becomes ready once the first one stops.

A retired service is closed only when the last request using it has finished (`lease`), so a
reopen never pulls the store from under a search in flight.

A holder given an `Owner` (`ctxr serve` on an embedded index) announces it in the index's
owner file while it has the shard open, and withdraws it when it lets the shard go, so other
ctxr processes reach the index through this server (`ctxr.index.owner`). Updates written
through the open store (`writing`, for `ctxr watch`) rewrite the manifest; the holder records
the new identity itself, and checks the disk neither during nor because of them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from fastapi import HTTPException

from ctxr.config import Settings
from ctxr.errors import CtxrError
from ctxr.index.manifest import MANIFEST_NAME
from ctxr.index.owner import Owner, announce, withdraw
from ctxr.index.store.factory import shard_path
from ctxr.retrieve.service import SearchService

T = TypeVar("T")

log = logging.getLogger("ctxr.api")
CHECK_SECONDS = 1.0
RETRY_SECONDS = 2.0

Identity = tuple[tuple[int, ...] | None, ...]


def identity(index_dir: Path) -> Identity:
    """What tells one index directory from another that replaced it, and an edited manifest."""

    def stat(path: Path, content: bool = False) -> tuple[int, ...] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if content else (
            st.st_dev, st.st_ino)  # fmt: skip

    return (stat(index_dir), stat(shard_path(index_dir)), stat(index_dir / MANIFEST_NAME, True))


class ServiceHolder:
    def __init__(self, settings: Settings, owner: Owner | None = None) -> None:
        self.settings = settings
        self.owner = owner
        self.index_dir = Path(settings.index_dir)
        self.service: SearchService | None = None
        self.error: str | None = None
        self._identity: Identity | None = None
        self._lock = threading.Lock()  # guards the fields below and `service`
        self._opening = threading.Lock()  # one open at a time; others answer 503 meanwhile
        self._users: dict[int, int] = {}
        self._retired: dict[int, SearchService] = {}
        self._checked = 0.0
        self._tried = 0.0
        self._deleted: str | None = None  # said while the deleted index stays missing
        self._gate = threading.Lock()  # a write, or a look at the disk: never both at once

    def open(self) -> None:
        if not self._opening.acquire(blocking=False):
            return
        try:
            self._tried = time.monotonic()
            seen = identity(self.index_dir)
            service, error = _open(self.settings)
            if service is not None or seen[2] is not None:
                self._deleted = None
            elif self._deleted:
                error = self._deleted
            with self._lock:
                self.service, self.error, self._identity = service, error, seen
            if error:
                log.warning(f"serving without an index: {error}")
            elif self.owner is not None:
                self._announce()
        finally:
            self._opening.release()

    def refresh(self, force: bool = False) -> None:
        """Notice a deleted, replaced or newly available index (see the module docstring)."""
        now = time.monotonic()
        if not force and now - self._checked < CHECK_SECONDS:
            return
        if not self._gate.acquire(blocking=False):
            return  # an update is being written; it records the index's identity itself
        try:
            self._check(now, force)
        finally:
            self._gate.release()

    @contextmanager
    def writing(self) -> Iterator[SearchService]:
        """The service, for one update written through its own store; one at a time."""
        with self._gate:
            self._check(time.monotonic(), True)  # not into an index deleted meanwhile
            with self.lease() as service:
                try:
                    yield service
                finally:
                    with self._lock:  # our own manifest rewrite is no replacement
                        self._identity = identity(self.index_dir)

    def _check(self, now: float, force: bool) -> None:
        self._checked = now
        if self.service is None:
            if force or now - self._tried >= RETRY_SECONDS:
                self.open()
            return
        seen = identity(self.index_dir)
        if seen == self._identity:
            return
        if seen[0] is None or seen[2] is None:
            self._deleted = (f"the index at {self.index_dir} was deleted while the server was "
                             "running; build it again with `ctxr index PATH --index "
                             f"{self.index_dir}` and the server reopens it")  # fmt: skip
            self._retire(self._deleted)
            return
        log.warning(f"the index at {self.index_dir} changed on disk; reopening it")
        self._retire(f"the index at {self.index_dir} changed on disk and is being reopened")
        self.open()

    @contextmanager
    def lease(self) -> Iterator[SearchService]:
        """The service for one request; a retired one is closed after its last request."""
        self.refresh()
        with self._lock:
            service = self.service
            if service is None:
                raise HTTPException(503, detail=self.error or "the index is not open")
            self._users[id(service)] = self._users.get(id(service), 0) + 1
        try:
            yield service
        finally:
            self._release(service)

    def using(self, work: Callable[[SearchService], T]) -> T:
        """`work` done with the service under one lease. A request calls this in one worker
        thread: the lease may stat or reopen the index, so it never runs on the event loop,
        and leasing, searching and releasing in one thread hop keeps a search's overhead
        down (a dependency leasing it took two hops more)."""
        with self.lease() as service:
            return work(service)

    def _release(self, service: SearchService) -> None:
        with self._lock:
            key = id(service)
            self._users[key] -= 1
            done = self._users[key] == 0
            if done:
                del self._users[key]
            retired = self._retired.pop(key, None) if done else None
        if retired is not None:
            retired.close()

    def _retire(self, reason: str) -> None:
        with self._lock:
            service, self.service, self.error = self.service, None, reason
            if service is None:
                return
            if self.owner is not None:
                withdraw(self.index_dir, self.owner)
            if self._users.get(id(service)):
                self._retired[id(service)] = service
                return
        service.close()

    def close(self) -> None:
        self._retire("the server is stopping")

    def _announce(self) -> None:
        assert self.owner is not None
        try:
            announce(self.index_dir, self.owner)
        except OSError as exc:  # a read-only index directory: serve on, unannounced
            log.warning(f"cannot write the owner file in {self.index_dir} ({exc}); other "
                        "ctxr commands will not find this server")  # fmt: skip


def _open(settings: Settings) -> tuple[SearchService | None, str | None]:
    try:
        service = SearchService(settings)
    except CtxrError as exc:
        return None, str(exc)
    except Exception as exc:  # a broken shard may raise anything; report it, do not crash
        log.exception("cannot open the index")
        return None, f"cannot open the index at {settings.index_dir}: {exc!r}"
    # Load the embedding model now rather than in the first user's request; a model that
    # cannot be loaded, or a search that fails, makes the service unavailable with the reason.
    try:
        service.search("warm up", k=1, mode="dense")
    except Exception as exc:
        service.close()
        if isinstance(exc, CtxrError):
            return None, str(exc)
        log.exception("the warm-up search failed")
        return None, f"the index at {settings.index_dir} cannot be searched: {exc!r}"
    return service, None
