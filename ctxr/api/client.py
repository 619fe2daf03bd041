"""Reaching an index that a running `ctxr serve` owns, over its loopback HTTP API.

The embedded shard is one process's (`ctxr.index.owner`); while a server owns it, `ctxr search`
sends its queries to that server and `ctxr watch` its changes, with the token from the owner
file. `ServedIndex` answers `search` and `search_many` as `SearchService` does, with `Hit`s
rebuilt from the server's hit JSON, so the CLI prints a served hit with the same code as a
local one. Standard-library HTTP only: this must work on an install without the server extra's
client libraries.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ctxr.config import Settings
from ctxr.errors import ConfigError, CtxrError, IndexError_, IndexInUseError, IndexNotFoundError
from ctxr.index.owner import Owner, cwd_mismatch, live_owner
from ctxr.retrieve.hits import hit_from_json
from ctxr.retrieve.service import SearchService
from ctxr.types import Hit

UPDATE_PATH = "/index/update"  # the live index's write endpoint (`ctxr.api.live`)
SEARCH_TIMEOUT = 120.0
# An update may situate with an LLM on the server: minutes for a large file are not a failure.
UPDATE_TIMEOUT = 3600.0


def open_searcher(
    settings: Settings,
    *,
    candidates: int | None = None,
    fusion: str | None = None,
    rrf_k: int | None = None,
) -> SearchService | ServedIndex:
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


class ServedIndex:
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
        self.owner = owner
        self._max_batch = max(1, max_batch)
        # A paid reranker's batches stay within the server's CTXR_API_MAX_RERANK_QUERIES.
        self._max_rerank = max(1, max_rerank)
        self._rerank = rerank  # the reranker a search that names none uses (CTXR_RERANK)
        self._candidates = candidates
        self._fusion = fusion

    def __enter__(self) -> ServedIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        return None  # one connection per request: nothing is held between them

    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        candidates: int | None = None,
        fusion: str | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        merge: bool = False,
        rerank: str | None = None,
        expand: bool = False,
    ) -> list[Hit]:
        return self.search_many(
            [query], k, mode, candidates, fusion,
            filters=filters, merge=merge, rerank=rerank, expand=expand,
        )[0]  # fmt: skip

    def search_many(
        self,
        queries: Sequence[str],
        k: int = 10,
        mode: str = "hybrid",
        candidates: int | None = None,
        fusion: str | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        merge: bool = False,
        rerank: str | None = None,
        expand: bool = False,
    ) -> list[list[Hit]]:
        options: dict[str, Any] = {"k": k, "mode": mode, "merge": merge, "expand": expand}
        extra = {
            "candidates": candidates if candidates is not None else self._candidates,
            "fusion": fusion if fusion is not None else self._fusion,
            "filters": dict(filters) if filters is not None else None,
            "rerank": rerank,
        }
        options.update({key: value for key, value in extra.items() if value is not None})
        results: list[list[Hit]] = []
        paid = (rerank if rerank is not None else self._rerank or "none") in ("llm", "http")
        size = min(self._max_batch, self._max_rerank) if paid else self._max_batch
        for start in range(0, len(queries), size):  # within the server's batch limits
            batch = list(queries[start : start + size])
            answer = self._post("/search", {"queries": batch, **options}, SEARCH_TIMEOUT)
            results.extend([hit_from_json(h) for h in r["hits"]] for r in answer["results"])
        return results

    def update(self, roots: Sequence[str], changed: Sequence[str]) -> dict[str, Any]:
        """Have the server re-index `changed` under `roots` (`ctxr.api.live`); its report."""
        cwd = os.getcwd()
        mismatch = cwd_mismatch(list(roots), cwd, self.owner.cwd)
        if mismatch:
            raise ConfigError(mismatch)
        body = {"roots": list(roots), "changed": list(changed), "cwd": cwd}
        answer: dict[str, Any] = self._post(UPDATE_PATH, body, UPDATE_TIMEOUT)
        return answer

    def _post(self, path: str, body: Mapping[str, Any], timeout: float) -> Any:
        request = urllib.request.Request(
            self.owner.url + path,
            data=json.dumps(body).encode("utf-8"),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.owner.token}",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise _refused(self.owner, exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise IndexInUseError(
                f"the index is served by {self.owner.describe()}, which did not answer "
                f"({reason}); wait for it, or stop it (kill {self.owner.pid}) and retry"
            ) from None


def _refused(owner: Owner, exc: urllib.error.HTTPError) -> CtxrError:
    """The server's own reason for an error answer, as the error the CLI prints."""
    try:
        detail: Any = json.loads(exc.read()).get("detail", "")
    except (ValueError, AttributeError, OSError):
        detail = ""
    if isinstance(detail, list):  # a 422: FastAPI's list of field errors
        detail = "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg', '')}"
            for d in detail
            if isinstance(d, dict)
        )
    text = f"{owner.describe()} answered {exc.code}: {detail or exc.reason}"
    if exc.code in (400, 403, 409, 413, 422):
        return ConfigError(text)
    if exc.code == 410:  # the index is gone under the server
        return IndexNotFoundError(text)
    return IndexError_(text)
