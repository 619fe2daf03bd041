"""`RemoteSearcher`: a served index (`ctxr serve`) searched over its HTTP API.

The one HTTP client of a search, used by `ctxr.Client(base_url=...)`, by `ctxr search` when a
running server owns the index (`ctxr.api.client`), and so by the framework adapters. It sends
the same `SearchOptions` the local service takes, as POST /search with "queries", and rebuilds
each hit from the hit schema's JSON (`ctxr.retrieve.hits`), so a served hit is the `Hit` a local
search returns.

Standard-library HTTP only (`urllib`): it must work on an install without any extra, and it
keeps nothing between requests (one connection each), so nothing is bound to a thread or an
event loop: an async caller runs it in a worker thread (`asyncio.to_thread`), from any loop.

Errors read as whom the caller reached: a server the user named (`base_url=`) answers a
`ProviderError` with its status and whether to retry; the server that owns the caller's own
index (an `Owner`, for `ctxr search` and `ctxr watch`) answers the CLI's errors, naming it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from ctxr.errors import (
    ConfigError,
    CtxrError,
    IndexError_,
    IndexInUseError,
    IndexNotFoundError,
    ProviderError,
)
from ctxr.index.owner import Owner
from ctxr.retrieve.hits import hit_from_json
from ctxr.retrieve.searcher import SearchOptions
from ctxr.types import Hit

SEARCH_TIMEOUT = 120.0
PAID_RERANKERS = ("llm", "http")


class RemoteSearcher:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = SEARCH_TIMEOUT,
        max_batch: int = 32,
        max_rerank: int = 4,
        rerank: str | None = None,
        defaults: Mapping[str, Any] | None = None,
        owner: Owner | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.owner = owner
        self._token = token
        self._timeout = timeout
        self._max_batch = max(1, max_batch)
        # A paid reranker's batches stay within the server's CTXR_API_MAX_RERANK_QUERIES.
        self._max_rerank = max(1, max_rerank)
        self._rerank = rerank  # the reranker a search that names none uses (CTXR_RERANK)
        # Options the caller set for every search (the CLI's --candidates, --fusion), sent
        # unless a search names its own; otherwise the server's own defaults apply.
        self._defaults = {key: v for key, v in (defaults or {}).items() if v is not None}

    @classmethod
    def for_owner(cls, owner: Owner, **kwargs: Any) -> RemoteSearcher:
        """The server that owns an embedded index, with the token from its owner file."""
        return cls(owner.url, owner.token, owner=owner, **kwargs)

    def __enter__(self) -> RemoteSearcher:
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

    def search(self, query: str, *args: Any, **kwargs: Any) -> list[Hit]:
        return self.search_many([query], *args, **kwargs)[0]

    def search_many(self, queries: Sequence[str], *args: Any, **kwargs: Any) -> list[list[Hit]]:
        options = SearchOptions.given(*args, **kwargs)
        body = {**self._defaults, **_body(options)}
        rerank = options.rerank if options.rerank is not None else self._rerank or "none"
        size = min(self._max_batch, self._max_rerank) if rerank in PAID_RERANKERS else (
            self._max_batch)  # fmt: skip
        results: list[list[Hit]] = []
        for start in range(0, len(queries), size):  # within the server's batch limits
            batch = list(queries[start : start + size])
            answer = self.post("/search", {"queries": batch, **body}, self._timeout)
            results.extend([hit_from_json(h) for h in r["hits"]] for r in answer["results"])
        return results

    def post(self, path: str, body: Mapping[str, Any], timeout: float) -> Any:
        headers = {"Content-Type": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(
            self.base_url + path, data=json.dumps(body).encode("utf-8"), headers=headers,
            method="POST",
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise self._refused(path, exc.code, _detail(exc) or str(exc.reason)) from None
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(getattr(exc, "reason", exc)) from None

    def _refused(self, path: str, status: int, detail: str) -> CtxrError:
        if self.owner is None:
            return ProviderError(
                f"ctxr serve at {self.base_url} answered {status} to {path}: {detail}",
                retryable=status == 429 or status >= 500,
                status=status,
            )
        text = f"{self.owner.describe()} answered {status}: {detail}"
        if status in (400, 403, 409, 413, 422):
            return ConfigError(text)
        if status == 410:  # the index is gone under the server
            return IndexNotFoundError(text)
        return IndexError_(text)

    def _unreachable(self, reason: object) -> CtxrError:
        if self.owner is None:
            return ProviderError(
                f"cannot reach ctxr serve at {self.base_url} ({type(reason).__name__}: "
                f"{reason}); is it running?",
                retryable=True,
                timed_out="timed out" in str(reason).lower() or isinstance(reason, TimeoutError),
                connection=True,
            )
        return IndexInUseError(
            f"the index is served by {self.owner.describe()}, which did not answer "
            f"({reason}); wait for it, or stop it (kill {self.owner.pid}) and retry"
        )


def _body(options: SearchOptions) -> dict[str, Any]:
    """The fields of POST /search an options value sets (None: the server's default)."""
    body: dict[str, Any] = {
        "k": options.k, "mode": options.mode, "merge": options.merge, "expand": options.expand,
    }  # fmt: skip
    extra = {
        "candidates": options.candidates,
        "fusion": options.fusion,
        "filters": dict(options.filters) if options.filters is not None else None,
        "rerank": options.rerank,
    }
    body.update({key: value for key, value in extra.items() if value is not None})
    return body


def _detail(exc: urllib.error.HTTPError) -> str:
    """The server's own reason for an error answer."""
    try:
        detail: Any = json.loads(exc.read()).get("detail", "")
    except (ValueError, AttributeError, OSError):
        return ""
    if isinstance(detail, list):  # a 422: FastAPI's list of field errors
        return "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg', '')}"
            if isinstance(d, dict) else str(d)
            for d in detail
        )  # fmt: skip
    return str(detail)
