"""One open shard per index per process, shared by every search service that opens it.

An embedded index (qdrant-edge) can be opened once at a time: the engine locks its
write-ahead log, and a second open in the same process is refused like one from another
process. Yet one program may well hold several searches of one index: two LangChain
retrievers, `ctxr.open_index` beside an MCP server, a server's old and new service while a
request finishes. So the store is opened once per index directory (resolved, so two spellings
of one path are one key) and lent out: each service that opens the index takes a lease, and the
store is closed when the last lease is returned.

What is shared is the store alone: each service keeps its own settings (fusion, candidates,
reranker, embedder), so two retrievers that search one index differently both get what they
asked for. A directory replaced under a lease (a rebuilt index at the same path) is a new key
identity: the next open gets the new shard, and the old one closes with its last lease.
A store on a Qdrant server is not shared: every client may connect.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ctxr.config import StoreSettings
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import Store

Identity = tuple[int, int] | None


@dataclass(slots=True)
class _Lease:
    store: Store
    identity: Identity
    users: int = 1


_lock = threading.Lock()
_current: dict[Path, _Lease] = {}  # the store a new open of each index gets
_leased: dict[int, _Lease] = {}  # every store lent out, current or replaced, by id()


def _identity(index_dir: Path) -> Identity:
    try:
        st = os.stat(store_factory.shard_path(index_dir))
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def open_store(config: StoreSettings, index_dir: Path, dim: int | None = None) -> Store:
    """The index's store, opened now or lent from the service that opened it; give it back
    with `close_store`."""
    if config.qdrant_url:
        return store_factory.open_store(config, index_dir, dim)
    key = index_dir.resolve()
    with _lock:  # opening is a second at most; two opens of one index must not race
        lease = _current.get(key)
        if lease is not None and lease.identity == _identity(key):
            lease.users += 1
            return lease.store
        store = store_factory.open_store(config, index_dir, dim)
        lease = _Lease(store, _identity(key))
        _current[key] = lease
        _leased[id(store)] = lease
        return store


def close_store(store: Store) -> None:
    """Give a store back; the last lease closes it."""
    with _lock:
        lease = _leased.get(id(store))
        if lease is None:  # a server store, or one never lent: its own
            store.close()
            return
        lease.users -= 1
        if lease.users > 0:
            return
        del _leased[id(store)]
        for key, current in list(_current.items()):
            if current is lease:
                del _current[key]
        store.close()  # under the lock: an open that follows must find the shard free


def users(index_dir: Path) -> int:
    """How many services of this process hold the index open (0: none)."""
    with _lock:
        lease = _current.get(index_dir.resolve())
        return lease.users if lease is not None else 0
