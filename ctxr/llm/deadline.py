"""A deadline for a whole request, and a cap on how much of an answer is read.

httpx2's timeouts (which both SDKs use) bound each network operation: the connection, and
every single read. A server that sends `200`, a large Content-Length and then one byte a second
answers each read in time and holds a request open for as long as it likes. ctxr's timeouts
(`CTXR_LLM_TIMEOUT`, `CTXR_EMBEDDING_TIMEOUT`, `CTXR_RERANK_TIMEOUT`) are meant per request, so
they are enforced twice:

- async calls (the context writers) run under `asyncio.timeout` (in each provider's
  `complete`): from the first byte sent to the parsed answer, headers included, whatever the
  server does;
- every response of the clients `clients.py` makes passes through these hooks, which
  wraps its body: each chunk that arrives is checked against the request's deadline (a sync
  caller has no event loop to cancel with), and the bytes read so far against the endpoint's
  cap. A sync request thus ends within its timeout of the deadline: the read in progress
  when it passes is still bounded by the per-read timeout.

The cap (`MAX_ANSWER_BYTES`) applies to generation endpoints: a context or a rerank verdict
is a few hundred tokens, and a server that ignores the output budget must not make ctxr hold
(or cache) megabytes. The Batch API's uploads and result files are neither capped nor bound
by the per-request deadline: they are large by design, and the batch poller has its own
schedule.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Final

import httpx2

# 1 MiB: two thousand times a 200-token context, far beyond any grouped answer (16 chunks'
# contexts are ~15 KB of JSON), and small enough that a runaway server costs nothing to refuse.
MAX_ANSWER_BYTES: Final = 1 << 20
_DEADLINE_KEY: Final = "ctxr_deadline"


class AnswerTooLarge(Exception):
    """A response body longer than its endpoint's cap; the rest is never read."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the answer is longer than {limit:,} bytes (a server that ignores the output "
            "budget); the rest was not read"
        )
        self.limit = limit


def too_large(exc: BaseException) -> AnswerTooLarge | None:
    """The `AnswerTooLarge` behind an SDK's connection error, if that is what it wraps."""
    seen: BaseException | None = exc
    for _ in range(4):  # the SDKs chain one or two levels deep
        if seen is None:
            return None
        if isinstance(seen, AnswerTooLarge):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class _Bounded(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A response body read under a deadline and a size cap."""

    def __init__(
        self,
        inner: httpx2.SyncByteStream | httpx2.AsyncByteStream,
        request: httpx2.Request,
        deadline: float | None,
        limit: int | None,
        timeout: float,
    ) -> None:
        self._inner, self._request = inner, request
        self._deadline, self._limit, self._timeout = deadline, limit, timeout
        self._read = 0

    def _check(self, chunk: bytes) -> None:
        self._read += len(chunk)
        if self._limit is not None and self._read > self._limit:
            raise AnswerTooLarge(self._limit)
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise httpx2.ReadTimeout(
                f"the whole request took longer than {self._timeout:g} s", request=self._request
            )

    def __iter__(self) -> Iterator[bytes]:
        assert isinstance(self._inner, httpx2.SyncByteStream)
        for chunk in self._inner:
            self._check(chunk)
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert isinstance(self._inner, httpx2.AsyncByteStream)
        async for chunk in self._inner:
            self._check(chunk)
            yield chunk

    def close(self) -> None:
        if isinstance(self._inner, httpx2.SyncByteStream):
            self._inner.close()

    async def aclose(self) -> None:
        if isinstance(self._inner, httpx2.AsyncByteStream):
            await self._inner.aclose()


# Endpoint (the path's ending) -> its body cap (None: deadline only).
Bounds = Mapping[str, int | None]


# The endpoints of each provider read under the deadline, and their caps: a batch of
# embeddings is megabytes by design.
ANTHROPIC_BOUNDS: Final[Bounds] = {"/messages": MAX_ANSWER_BYTES}
OPENAI_BOUNDS: Final[Bounds] = {"/chat/completions": MAX_ANSWER_BYTES, "/embeddings": None}


def _bound_for(request: httpx2.Request, bounds: Bounds) -> tuple[bool, int | None]:
    path = request.url.path.rstrip("/")
    for suffix, limit in bounds.items():
        if path.endswith(suffix):
            return True, limit
    return False, None


def _start(request: httpx2.Request, bounds: Bounds, timeout: float) -> None:
    if _bound_for(request, bounds)[0]:
        request.extensions[_DEADLINE_KEY] = time.monotonic() + timeout


def _wrap(response: httpx2.Response, bounds: Bounds, timeout: float) -> None:
    bound, limit = _bound_for(response.request, bounds)
    if not bound:
        return
    deadline = response.request.extensions.get(_DEADLINE_KEY)
    length = response.headers.get("content-length", "")
    if limit is not None and response.is_success and length.isdigit() and int(length) > limit:
        raise AnswerTooLarge(limit)  # said up front: not a byte of it is read
    response.stream = _Bounded(response.stream, response.request, deadline, limit, timeout)


def sync_hooks(bounds: Bounds, timeout: float) -> dict[str, list[Callable[..., object]]]:
    """`event_hooks` for an `httpx2.Client`: `bounds`' endpoints read under the deadline."""

    def on_request(request: httpx2.Request) -> None:
        _start(request, bounds, timeout)

    def on_response(response: httpx2.Response) -> None:
        _wrap(response, bounds, timeout)

    return {"request": [on_request], "response": [on_response]}


def async_hooks(bounds: Bounds, timeout: float) -> dict[str, list[Callable[..., object]]]:
    """`event_hooks` for an `httpx2.AsyncClient`, as `sync_hooks`."""

    async def on_request(request: httpx2.Request) -> None:
        _start(request, bounds, timeout)

    async def on_response(response: httpx2.Response) -> None:
        _wrap(response, bounds, timeout)

    return {"request": [on_request], "response": [on_response]}
