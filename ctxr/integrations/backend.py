"""Where the framework retrievers get their hits: an embedded index or `ctxr serve`'s HTTP API.

Either way a hit is one hit of the schema every face shares (`ctxr.retrieve.hits`,
``ctxr.hits/1``): `hit_json` here, the "hits" of POST /search's answer there, so the LangChain
and LlamaIndex adapters convert one shape. The embedded index opens on first use and stays
open (a qdrant-edge shard is one process's at a time: close the retriever, or use `base_url=`
to share a served index); async searches run it in a worker thread. Over HTTP one client per
kind (sync, async) is kept for the retriever's life; an error answer becomes a `ProviderError`
with the server's own reason.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxr.config import SEARCH_MODES
from ctxr.errors import ConfigError, ProviderError

if TYPE_CHECKING:
    import httpx

    from ctxr.retrieve.service import SearchService

HitJson = dict[str, Any]


class CtxrBackend:
    def __init__(
        self,
        index_dir: str | Path | None = None,
        base_url: str | None = None,
        *,
        api_token: str | None = None,
        timeout: float = 30.0,
        **settings: Any,
    ) -> None:
        if (index_dir is None) == (base_url is None):
            raise ConfigError(
                "give exactly one of index_dir= (an index on this machine) or base_url= "
                "(a running `ctxr serve`, e.g. http://127.0.0.1:8000)"
            )
        if base_url is not None and settings:
            raise ConfigError(
                f"settings {sorted(settings)} apply to an embedded index (index_dir=); "
                "a server searches with its own"
            )
        self.index_dir = Path(index_dir) if index_dir is not None else None
        self.base_url = base_url.rstrip("/") if base_url is not None else None
        self._token = api_token
        self._timeout = timeout
        self._settings = settings
        self._service: SearchService | None = None
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None
        self._lock = threading.Lock()

    def search(
        self, query: str, k: int, mode: str = "hybrid", filters: Mapping[str, Any] | None = None
    ) -> list[HitJson]:
        _check(query, k, mode)
        if self.base_url is None:
            from ctxr.retrieve.hits import hit_json

            hits = self._embedded().search(query, k, mode, filters=filters)
            return [hit_json(h) for h in hits]
        import httpx

        try:
            response = self._http().post("/search", json=_body(query, k, mode, filters))
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return _hits(response, self.base_url)

    async def asearch(
        self, query: str, k: int, mode: str = "hybrid", filters: Mapping[str, Any] | None = None
    ) -> list[HitJson]:
        _check(query, k, mode)
        if self.base_url is None:
            return await asyncio.to_thread(self.search, query, k, mode, filters)
        import httpx

        try:
            response = await self._ahttp().post("/search", json=_body(query, k, mode, filters))
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return _hits(response, self.base_url)

    def close(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.close()
                self._service = None
            if self._client is not None:
                self._client.close()
                self._client = None
        # An AsyncClient is closed by `aclose` from its own loop; dropping it here is safe.

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self.close()

    def _embedded(self) -> SearchService:
        with self._lock:
            if self._service is None:
                from ctxr.config import load_settings
                from ctxr.retrieve.service import SearchService

                settings = load_settings(index_dir=self.index_dir, **self._settings)
                self._service = SearchService(settings)
            return self._service

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    base_url=str(self.base_url), headers=self._headers(), timeout=self._timeout
                )
            return self._client

    def _ahttp(self) -> httpx.AsyncClient:
        import httpx

        with self._lock:
            if self._aclient is None:
                self._aclient = httpx.AsyncClient(
                    base_url=str(self.base_url), headers=self._headers(), timeout=self._timeout
                )
            return self._aclient


def _check(query: str, k: int, mode: str) -> None:
    # The same refusals on both paths, before an index is opened or a request sent.
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"query must be a non-empty string, got {query!r:.80}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be a whole number of at least 1, got {k!r}")
    if mode not in SEARCH_MODES:
        raise ConfigError(f"unknown search mode {mode!r}; use one of {', '.join(SEARCH_MODES)}")


def _body(query: str, k: int, mode: str, filters: Mapping[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "k": k, "mode": mode}
    if filters:
        body["filters"] = dict(filters)
    return body


def _hits(response: httpx.Response, base_url: str) -> list[HitJson]:
    if response.is_success:
        hits: list[HitJson] = response.json()["hits"]
        return hits
    try:
        detail: Any = response.json().get("detail")
    except ValueError:
        detail = response.text[:300]
    status = response.status_code
    raise ProviderError(
        f"ctxr serve at {base_url} answered {status} to /search: {detail}",
        retryable=status == 429 or status >= 500,
        status=status,
    )


def _unreachable(base_url: str, exc: Exception) -> ProviderError:
    return ProviderError(
        f"cannot reach ctxr serve at {base_url} ({type(exc).__name__}: {exc}); is it running?",
        retryable=True,
        timed_out="Timeout" in type(exc).__name__,
        connection=True,
    )
