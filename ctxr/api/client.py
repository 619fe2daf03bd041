"""Reaching an index that a running `ctxr serve` owns, over its loopback HTTP API.

The embedded shard is one process's (`ctxr.index.owner`); while a server owns it, `ctxr search`
sends its queries to that server (`ctxr.Client.for_index`) and `ctxr watch` its changes, with
the token from the owner file. Both go through the one HTTP client of a search
(`ctxr.retrieve.remote.RemoteSearcher`); `ServedIndex` adds the live index's write endpoint.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ctxr.errors import ConfigError
from ctxr.index.owner import Owner, cwd_mismatch
from ctxr.retrieve.remote import SEARCH_TIMEOUT, RemoteSearcher

__all__ = ["SEARCH_TIMEOUT", "UPDATE_PATH", "ServedIndex"]

UPDATE_PATH = "/index/update"  # the live index's write endpoint (`ctxr.api.live`)
# An update may situate with an LLM on the server: minutes for a large file are not a failure.
UPDATE_TIMEOUT = 3600.0


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
