"""Reaching an index that a running `ctxr serve` owns, over its loopback HTTP API.

The embedded shard is one process's (`ctxr.index.owner`); while a server owns it, `ctxr search`
sends its queries to that server and `ctxr watch` its changes, with the token from the owner
file. Both go through the one HTTP client of a search (`ctxr.retrieve.remote.RemoteSearcher`),
so the CLI prints a served hit with the same code as a local one; `ServedIndex` adds the live
index's write endpoint.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxr.config import Settings
from ctxr.errors import ConfigError
from ctxr.index.owner import Owner, cwd_mismatch, live_owner
from ctxr.retrieve.remote import SEARCH_TIMEOUT, RemoteSearcher
from ctxr.retrieve.searcher import Searcher
from ctxr.retrieve.service import SearchService

__all__ = ["SEARCH_TIMEOUT", "UPDATE_PATH", "ServedIndex", "open_searcher"]

UPDATE_PATH = "/index/update"  # the live index's write endpoint (`ctxr.api.live`)
# An update may situate with an LLM on the server: minutes for a large file are not a failure.
UPDATE_TIMEOUT = 3600.0


def open_searcher(
    settings: Settings,
    *,
    candidates: int | None = None,
    fusion: str | None = None,
    rrf_k: int | None = None,
) -> Searcher:
    """The index's own search service, or the server that owns the index now. The explicit
    options are sent to a server, which otherwise searches with its own defaults."""
    owner = None if settings.qdrant_url else live_owner(Path(settings.index_dir))
    if owner is None:
        return SearchService(settings)
    if rrf_k is not None:
        raise ConfigError(
            f"--rrf-k cannot be sent to {owner.describe()}, which searches this index with "
            "its own CTXR_RRF_K; leave it out, or stop the server to search with it"
        )
    return ServedIndex(
        owner, settings.api_max_batch, candidates=candidates, fusion=fusion,
        max_rerank=settings.api_max_rerank_queries, rerank=settings.rerank,
    )  # fmt: skip


class ServedIndex(RemoteSearcher):
    """The server that owns an index: its search, and its live updates."""

    def __init__(
        self,
        owner: Owner,
        max_batch: int = 32,
        *,
        candidates: int | None = None,
        fusion: str | None = None,
        max_rerank: int = 4,
        rerank: str | None = None,
    ) -> None:
        super().__init__(
            owner.url, owner.token, owner=owner, max_batch=max_batch, max_rerank=max_rerank,
            rerank=rerank, defaults={"candidates": candidates, "fusion": fusion},
        )  # fmt: skip

    def update(self, roots: Sequence[str], changed: Sequence[str]) -> dict[str, Any]:
        """Have the server re-index `changed` under `roots` (`ctxr.api.live`); its report."""
        assert self.owner is not None
        cwd = os.getcwd()
        mismatch = cwd_mismatch(list(roots), cwd, self.owner.cwd)
        if mismatch:
            raise ConfigError(mismatch)
        body = {"roots": list(roots), "changed": list(changed), "cwd": cwd}
        answer: dict[str, Any] = self.post(UPDATE_PATH, body, UPDATE_TIMEOUT)
        return answer
