"""`ctxr.Client`: the one way in to a search, local or served.

    client = ctxr.Client(index_dir=".ctxr")                 # the index on this machine
    client = ctxr.Client(base_url="http://127.0.0.1:8000")  # a running `ctxr serve`
    hits = client.search("restore a backup", SearchOptions(k=5, mode="bm25"))
    hits = client.search("restore a backup", k=5)           # the same, by field
    hits = await client.asearch("restore a backup", k=5)    # from any event loop

Either way the client is a `Searcher` (`ctxr.retrieve.searcher`) over one of two: the local
search service (`ctxr.retrieve.service`), opened on first use and shared with every other
service of this process on the same index (`ctxr.retrieve.shared`), or the HTTP client of a
served index (`ctxr.retrieve.remote`). The CLI, the MCP server, the framework adapters and the
Python API all search through it, so options, checks and hits are the same at every door.

An open that fails (no index yet, a damaged one) is not remembered: the next search tries
again, so a long-lived caller started before `ctxr index` recovers. `close()` lets the index go;
a later search opens it again. Async calls run the search in a worker thread: nothing is bound
to an event loop, so a client serves one `asyncio.run` after another.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ctxr.config import Settings, load_settings
from ctxr.errors import ConfigError
from ctxr.index.owner import live_owner
from ctxr.retrieve.remote import SEARCH_TIMEOUT, RemoteSearcher
from ctxr.retrieve.searcher import Searcher, SearchOptions
from ctxr.retrieve.service import SearchService
from ctxr.types import Hit

__all__ = ["Client", "SearchOptions", "Searcher"]


class Client:
    """Search an index: `index_dir=` (or `settings=`) on this machine, or `base_url=` of a
    running `ctxr serve` (`api_token=` for its CTXR_API_TOKEN). Other keywords are settings
    of a local index (`ctxr.config`)."""

    def __init__(
        self,
        index_dir: str | Path | None = None,
        base_url: str | None = None,
        *,
        api_token: str | None = None,
        timeout: float = SEARCH_TIMEOUT,
        settings: Settings | None = None,
        remote: RemoteSearcher | None = None,
        **overrides: Any,
    ) -> None:
        local = index_dir is not None or settings is not None
        if remote is None and local == (base_url is not None):
            raise ConfigError(
                "give exactly one of index_dir= (an index on this machine) or base_url= "
                "(a running `ctxr serve`, e.g. http://127.0.0.1:8000)"
            )
        if (base_url is not None or remote is not None) and overrides:
            raise ConfigError(
                f"settings {sorted(overrides)} apply to an embedded index (index_dir=); "
                "a server searches with its own"
            )
        if settings is not None and (index_dir is not None or overrides):
            raise ConfigError("give settings= alone, or index_dir= and settings by name")
        self._settings = settings
        self._index_dir = index_dir
        self._overrides = overrides
        if remote is None and base_url is not None:
            remote = RemoteSearcher(base_url, api_token, timeout=timeout)
        self._remote = remote  # a served index, or None for the local one
        self._service: SearchService | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_index(
        cls,
        settings: Settings,
        *,
        candidates: int | None = None,
        fusion: str | None = None,
        rrf_k: int | None = None,
    ) -> Client:
        """The index `settings` names, or the `ctxr serve` that owns it now (`ctxr search`):
        the explicit options are sent to a server, which otherwise searches with its own."""
        owner = None if settings.store.qdrant_url else live_owner(Path(settings.index_dir))
        if owner is None:
            return cls(settings=settings)
        if rrf_k is not None:
            raise ConfigError(
                f"--rrf-k cannot be sent to {owner.describe()}, which searches this index with "
                "its own CTXR_RRF_K; leave it out, or stop the server to search with it"
            )
        api = settings.api
        remote = RemoteSearcher.for_owner(
            owner, max_batch=api.api_max_batch, max_rerank=api.api_max_rerank_queries,
            rerank=settings.search.rerank, defaults={"candidates": candidates, "fusion": fusion},
        )  # fmt: skip
        return cls(settings=settings, remote=remote)

    @property
    def settings(self) -> Settings:
        """The local index's settings (a served index searches with its own)."""
        if self._settings is None:
            if self._remote is not None:
                raise ConfigError("a served index's settings are the server's: GET /stats")
            self._settings = load_settings(index_dir=self._index_dir, **self._overrides)
        return self._settings

    @property
    def searcher(self) -> Searcher:
        """What answers: the served index, or the local service (opened now if need be)."""
        return self._remote if self._remote is not None else self.service

    @property
    def service(self) -> SearchService:
        """The local search service, opened on first use (documents, passages, stats)."""
        if self._remote is not None:
            raise ConfigError(
                f"{self._remote.base_url} is a served index: it has no local search service"
            )
        with self._lock:
            if self._service is None:
                self._service = SearchService(self.settings)
            return self._service

    def search(self, query: str, *args: Any, **kwargs: Any) -> list[Hit]:
        """The hits for `query`: a `SearchOptions`, or its fields (k, mode, candidates,
        fusion; filters, merge, rerank, expand by name)."""
        return self.searcher.search(query, SearchOptions.given(*args, **kwargs))

    def search_many(self, queries: Sequence[str], *args: Any, **kwargs: Any) -> list[list[Hit]]:
        return self.searcher.search_many(queries, SearchOptions.given(*args, **kwargs))

    async def asearch(self, query: str, *args: Any, **kwargs: Any) -> list[Hit]:
        options = SearchOptions.given(*args, **kwargs)  # refused here, in the caller's task
        return await asyncio.to_thread(self.search, query, options)

    async def asearch_many(
        self, queries: Sequence[str], *args: Any, **kwargs: Any
    ) -> list[list[Hit]]:
        options = SearchOptions.given(*args, **kwargs)
        return await asyncio.to_thread(self.search_many, queries, options)

    def close(self) -> None:
        """Let the index go (the process's last user closes it); a later search reopens it."""
        with self._lock:
            service, self._service = self._service, None
        if service is not None:
            service.close()
        if self._remote is not None:
            self._remote.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __del__(self) -> None:
        # A client dropped unclosed (a retriever made in a loop, a framework's fixture) gives
        # its lease back, so the process's last user still closes the shard.
        with contextlib.suppress(Exception):  # nothing may escape a finaliser
            self.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
