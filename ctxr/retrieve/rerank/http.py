"""`HTTPReranker`: a Cohere-compatible ``/rerank`` endpoint (Cohere, Jina, Voyage, TEI...).

Request ``{"model", "query", "documents": [...], "top_n"}`` (``model`` only when
`CTXR_RERANK_MODEL` is set), bearer key from `CTXR_RERANK_API_KEY`. The answer's
``results`` (Cohere, Jina) or ``data`` (Voyage) list, or a bare list (text-embeddings-inference),
holds ``{"index", "relevance_score"}`` (or ``"score"``) items. Passages the server leaves out
(beyond ``top_n``) rank after those it scored, in fused order.

The standard library's HTTP client is enough for one POST per search, and adds no dependency.
Its timeout bounds each socket read, so the body is read piece by piece under a deadline for the
whole request (`CTXR_RERANK_TIMEOUT`) and up to `MAX_RERANK_BYTES`: a server that drips its
answer, or sends megabytes, cannot hold a search.
"""

from __future__ import annotations

import json
import math
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from ctxr.config import SearchSettings
from ctxr.errors import ConfigError, RerankError
from ctxr.llm.error_map import redact, safe_url, short
from ctxr.retrieve.rerank.base import RerankResult, rerank_with
from ctxr.types import Hit

DEFAULT_PATH: Final = "/v1/rerank"
UNREADABLE: Final = "rerank: unparseable answer"
# An answer is an index and a score per passage (a server may add the texts back): 8 MiB is
# far past any real one.
MAX_RERANK_BYTES: Final = 8 << 20
_READ_BYTES: Final = 64 << 10


def read_bounded(response: Any, deadline: float, limit: int) -> bytes:
    """The body of `response` (an http.client response), one socket read at a time, until
    `deadline` (monotonic) or `limit` bytes; `read1` returns what one read brings, so a server
    sending a byte a second is checked after every byte."""
    parts: list[bytes] = []
    size = 0
    while chunk := response.read1(_READ_BYTES):
        size += len(chunk)
        if size > limit:
            raise RerankError(f"rerank failed: the answer is longer than {limit:,} bytes")
        if time.monotonic() > deadline:
            raise TimeoutError
        parts.append(chunk)
    return b"".join(parts)


def endpoint(url: str) -> str:
    """The URL to POST to: `url` itself when its path ends in /rerank; a base URL ending in a
    version (`.../v1`, as OpenAI-style base URLs are written) gets /rerank; anything else
    /v1/rerank."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"CTXR_RERANK_URL={safe_url(url)!r} is not an http(s) URL")
    path = parts.path.rstrip("/")
    if path.endswith("/rerank"):
        return url
    if re.search(r"/v\d+$", path):
        return url.rstrip("/") + "/rerank"
    return url.rstrip("/") + DEFAULT_PATH


def parse_results(body: Any, count: int) -> list[float]:
    """One score per passage; those the server did not score rank last, in fused order."""
    items = body
    if isinstance(body, dict):
        items = body.get("results", body.get("data"))
    if not isinstance(items, list) or not items:
        raise RerankError(UNREADABLE)
    scores = [-math.inf] * count
    seen: set[int] = set()
    for item in items:
        if not isinstance(item, dict):
            raise RerankError(UNREADABLE)
        index = item.get("index")
        score = item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise RerankError(UNREADABLE)
        if index in seen or not isinstance(score, int | float) or isinstance(score, bool):
            raise RerankError(UNREADABLE)
        if not math.isfinite(score):
            raise RerankError(UNREADABLE)
        seen.add(index)
        scores[index] = float(score)
    # Below every scored one, and still a number a JSON answer can carry.
    floor = min(scores[i] for i in seen) - 1.0
    return [s if s != -math.inf else floor for s in scores]


class HTTPReranker:
    """Satisfies `ctxr.retrieve.rerank.base.Reranker` structurally; thread-safe (no shared
    state)."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = endpoint(url)
        self.model = model
        self._api_key = api_key
        self._timeout = timeout

    @classmethod
    def from_settings(cls, search: SearchSettings) -> HTTPReranker:
        if not search.rerank_url:
            raise ConfigError(
                "the http reranker needs CTXR_RERANK_URL, a Cohere-compatible rerank endpoint "
                "(e.g. https://api.cohere.com/v2/rerank), and usually CTXR_RERANK_API_KEY and "
                "CTXR_RERANK_MODEL"
            )
        key = search.rerank_api_key.get_secret_value() if search.rerank_api_key else None
        return cls(search.rerank_url, key, search.rerank_model, search.rerank_timeout)

    @property
    def name(self) -> str:
        return "http"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> RerankResult:
        return rerank_with(lambda q, p: self.score(q, p, top_n), query, hits, top_n)

    def score(self, query: str, passages: Sequence[str], top_n: int | None = None) -> list[float]:
        body: dict[str, Any] = {
            "query": query,
            "documents": list(passages),
            "top_n": min(top_n or len(passages), len(passages)),
        }
        if self.model:
            body["model"] = self.model
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        deadline = time.monotonic() + self._timeout
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                raw = read_bounded(response, deadline, MAX_RERANK_BYTES)
        except urllib.error.HTTPError as exc:
            detail = short(redact(exc.read().decode("utf-8", "replace"), self._api_key), 120)
            raise RerankError(f"rerank failed: HTTP {exc.code}: {detail}") from None
        except TimeoutError:
            raise RerankError("rerank failed: timeout") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise RerankError("rerank failed: timeout") from None
            raise RerankError(f"rerank failed: connection failed ({exc.reason})") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise RerankError(UNREADABLE) from None
        return parse_results(answer, len(passages))

    def close(self) -> None:
        pass
