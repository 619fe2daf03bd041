"""The HTTP API: `SearchService` served by FastAPI (the `server` extra), run by `ctxr serve`.

One `SearchService` per app, opened once in the lifespan and shared by every request. A search
runs in Starlette's thread pool, so the event loop keeps serving while ONNX and Qdrant work.
No lock is taken around the service: the embedder guards its own loading, onnxruntime's `run`
and a configured tokenizer may be shared between threads, and the qdrant-edge shard answers
concurrent reads from 16 threads with the same rankings as one thread (measured; see
docs/explanation/benchmarks.md). An index that is missing or does not match the settings does
not stop the app: it starts, `/health` answers 503 with the reason, and so do the endpoints that
need the index.

A request may name a reranker (`rerank`); one that fails or times out returns the fused order
with every hit flagged, never an error. A paid reranker (llm, http) makes one call per query, so
a request may rerank at most `CTXR_API_MAX_RERANK_QUERIES` queries with one (422 beyond).

`/health` answers every client, but names the index's files (absolute paths on the server)
only to a client that sent a valid token; others get the reason with the index directory
shortened to its name and any other absolute path to its last part.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ctxr.api.client import UPDATE_PATH
from ctxr.api.docs_assets import add_docs_routes
from ctxr.api.guard import ACCESS_KEY, AUTHORISED_KEY, Guard
from ctxr.api.highlight import add_highlight_route
from ctxr.api.holder import ServiceHolder
from ctxr.api.hosts import HostPolicy
from ctxr.api.live import add_live_routes
from ctxr.api.models import (
    DocumentResponse,
    ErrorResponse,
    HealthResponse,
    SearchRequestBase,
    StatsResponse,
    search_request_model,
)
from ctxr.api.openapi import complete_schema
from ctxr.api.overview import add_overview_route
from ctxr.api.page import PAGE_PATHS, add_page_routes
from ctxr.api.protocol import server_config
from ctxr.api.stats import stats_response
from ctxr.api.trials import add_trials_route
from ctxr.config import Settings
from ctxr.errors import ConfigError, CtxrError
from ctxr.index.owner import Owner
from ctxr.retrieve.hits import Asked, HitsBatch, HitsResult, hits_result, result_bytes
from ctxr.retrieve.rerank.registry import resolve as resolve_reranker
from ctxr.retrieve.searcher import SearchOptions

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("ctxr.api")
_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorResponse, "description": "the index cannot be used"}
}


PAID_RERANKERS = frozenset({"llm", "http"})  # one provider call per query reranked
# Answered without the token: /health (saying less without it), and the page's shell and
# files, which hold no data (the page asks for the token before it asks for any).
OPEN_PATHS = frozenset({"/health"}) | PAGE_PATHS


def create_app(
    settings: Settings, owner: Owner | None = None, *, hosts: HostPolicy | None = None
) -> FastAPI:
    """The ASGI app over the index `settings` names; the index opens when the app starts.

    With an `owner` (what `serve` passes for an embedded index) the app owns the index: it
    announces itself in the owner file while it holds the shard, accepts the owner token, and
    takes the live index's updates (`ctxr.api.live`). `hosts` is the Host-header policy
    (`ctxr.api.hosts`); `serve` always passes one, None (an app mounted in-process) checks
    no Host."""
    holder = ServiceHolder(settings, owner)
    token = settings.api.api_token.get_secret_value() if settings.api.api_token else None
    update_token = (
        settings.api.api_update_token.get_secret_value() if settings.api.api_update_token else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(holder.open)
        try:
            yield
        finally:
            await run_in_threadpool(holder.close)

    app = FastAPI(
        title="ctxr",
        summary="Hybrid (dense + BM25) search over a contextual-retrieval index",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load from a CDN; add_docs_routes serves them itself
        redoc_url=None,
    )
    private = frozenset({UPDATE_PATH}) if owner else frozenset()
    # Guard does the checking, for every path; the schema says what it answers.
    complete_schema(app, token=token is not None, open_paths=OPEN_PATHS, private_paths=private)
    add_docs_routes(app)
    add_page_routes(app)
    app.state.holder = holder
    app.add_middleware(
        Guard,
        token=token,
        max_body_bytes=settings.api.api_max_body_bytes,
        log_requests=settings.api.api_access_log,
        owner_token=owner.token if owner else None,
        open_paths=OPEN_PATHS,
        private_paths=private,
        update_token=update_token,
        hosts=hosts,
        body_timeout=settings.api.api_body_timeout,
    )
    if owner is not None:
        add_live_routes(app, holder, settings)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": [_explain(e) for e in exc.errors()]}, status_code=422)

    @app.exception_handler(CtxrError)
    async def ctxr_error(request: Request, exc: CtxrError) -> JSONResponse:
        status = 422 if isinstance(exc, ConfigError) else 503
        return JSONResponse({"detail": str(exc)}, status_code=status)

    async def search(request: Request, body: SearchRequestBase) -> Response:
        """Hybrid, dense or BM25 search: one query answers a `ctxr.hits/1` result, a batch
        ("queries") one per query under `results`. The search's time is in `Server-Timing`."""
        texts = body.texts
        _check_rerank_spend(body.rerank, len(texts), settings)
        fusion = body.fusion or settings.search.fusion
        access = request.scope.setdefault(ACCESS_KEY, {})
        access.update(queries=len(texts), k=body.k, mode=body.mode, fusion=fusion)
        if settings.api.api_log_queries:
            access["query_text"] = texts
        started = time.perf_counter()
        options = SearchOptions(
            body.k, body.mode, body.candidates, fusion,
            filters=body.filters, merge=body.merge, rerank=body.rerank, expand=body.expand,
        )  # fmt: skip
        results = await run_in_threadpool(holder.using, lambda s: s.search_many(texts, options))
        took_ms = (time.perf_counter() - started) * 1000
        asked = Asked(body.mode, fusion, body.k, body.merge, body.expand)
        answers = [hits_result(t, hits, asked) for t, hits in zip(texts, results, strict=True)]
        batch = HitsBatch.model_validate({"results": answers})
        answer = answers[0] if body.query is not None else batch
        return Response(
            result_bytes(answer),
            media_type="application/json",
            headers={"Server-Timing": f"search;dur={took_ms:.2f}"},
        )

    # The request model carries this server's limits, so it is made here; FastAPI reads the
    # body's type from the annotation.
    search.__annotations__["body"] = search_request_model(settings)
    app.post(
        "/search",
        response_model=HitsResult | HitsBatch,  # for the schema at /openapi.json and /docs
        responses={
            **_UNAVAILABLE,
            422: {
                "model": ErrorResponse,
                "description": "a field over a limit or not as the schema says (`detail`: a "
                "list naming each field), or more queries than a paid reranker may rerank "
                "(CTXR_API_MAX_RERANK_QUERIES; `detail`: a sentence)",
            },
        },
    )(search)

    @app.get("/health", responses={503: {"model": HealthResponse}})
    async def health(request: Request) -> JSONResponse:
        """200 when the index is open and answers; 503 with the reason otherwise (no token
        needed; full paths in the reason only for a client that sends a valid one).

        Each call looks at the index on disk: a deleted or replaced index is noticed here, and
        an index that could not be opened (in use, missing, damaged) is tried again."""
        await run_in_threadpool(holder.refresh, True)
        try:
            await run_in_threadpool(holder.using, lambda s: s.stats())  # touches the store
            return JSONResponse({"status": "ok"})
        except HTTPException as exc:
            reason = str(exc.detail)
        except CtxrError as exc:
            reason = str(exc)
        if not request.scope.get(AUTHORISED_KEY, False):
            reason = _without_paths(reason, Path(settings.index_dir))
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)

    @app.get("/stats", responses=_UNAVAILABLE)
    async def stats() -> StatsResponse:
        """Points, documents, the settings the index was built with, and its age."""
        return await run_in_threadpool(holder.using, lambda s: stats_response(s, settings))

    @app.get(
        "/documents/{doc_id:path}",
        responses={**_UNAVAILABLE, 404: {"model": ErrorResponse}},
    )
    async def document(doc_id: str) -> DocumentResponse:
        """One document's chunks in order, each with its context (the id is its source path)."""
        found = await run_in_threadpool(holder.using, lambda s: s.document(doc_id))
        if found is None:
            raise HTTPException(
                404, detail=f"no document {_short(doc_id)!r} in the index; ids are source "
                "paths as search hits give them in `doc_id`",
            )  # fmt: skip
        return DocumentResponse.model_validate(found)

    add_highlight_route(app, holder, settings.api.api_max_query_chars)
    add_overview_route(app, holder)
    add_trials_route(app, settings.api.api_trials)
    return app


def _check_rerank_spend(asked: str | None, queries: int, settings: Settings) -> None:
    """Refuse a request that would make more paid rerank calls than the server allows."""
    try:
        chosen = resolve_reranker(asked, settings.search)
    except ConfigError:
        return  # an unknown name is the request model's 422, with its own message
    limit = settings.api.api_max_rerank_queries
    if chosen in PAID_RERANKERS and queries > limit:
        raise HTTPException(
            422, detail=f"the {chosen} reranker makes one paid call per query, and this server "
            f"reranks at most {limit} queries a request (CTXR_API_MAX_RERANK_QUERIES); send "
            f"{queries} queries in requests of {limit}, or ask with \"rerank\": \"none\"",
        )  # fmt: skip


def _without_paths(reason: str, index_dir: Path) -> str:
    """`reason` with the index directory, however spelt, shown as its name only: an absolute
    path on the server tells an anonymous client where things live, and helps it no further."""
    spellings = {str(index_dir), str(index_dir.absolute()), str(index_dir.resolve())}
    for spelling in sorted(spellings, key=len, reverse=True):
        if spelling not in (".", ""):
            reason = reason.replace(spelling, index_dir.name or "the index")
    return _ABSOLUTE.sub(lambda m: m.group(1) + os.path.basename(m.group(2)), reason)


# An absolute path left in a reason (a file beside the index): shown by its last part.
_ABSOLUTE = re.compile(r"(^|[\s'\"(`])(/[^\s'\"`),;]+)")


def _explain(error: Any) -> Any:
    """A validation error as FastAPI writes it, minus a rejected input that is long, or that
    JSON cannot carry (NaN, a lone surrogate): echoing those back would fail the answer itself."""
    error = dict(error)
    if isinstance(error.get("input"), str | list | dict) and len(error["input"]) > 100:
        del error["input"]
    if not _json_safe(error.get("ctx")):
        error.pop("ctx", None)
    if "input" in error and not _json_safe(error["input"]):
        error["input"] = ascii(error["input"])[:100]
    return jsonable_encoder(error)


def _short(text: str, limit: int = 200) -> str:
    """An id echoed in an error: at most `limit` characters, never a client's 100 KB."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(jsonable_encoder(value), allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        return False
    return True


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the API on uvicorn until interrupted; access lines go to stderr as JSON."""
    _log_access_as_json()
    server, sock = owning_server(settings, host, port)
    # uvicorn shuts down cleanly on Ctrl-C, then raises it again: a clean stop, not an error.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve(sockets=[sock]))


def owning_server(settings: Settings, host: str, port: int) -> tuple[uvicorn.Server, socket.socket]:
    """A uvicorn server for the index, and its socket, already listening (port 0: any free one).

    The socket listens before the index opens, so the owner file (written once the shard is
    open) names a port that accepts connections from its first moment. A Qdrant-server index
    has no shard to own: there every process opens the collection itself, and no file is
    written."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port, "
            "or stop what is using it"
        ) from exc
    bound = sock.getsockname()[1]
    owner = None if settings.store.qdrant_url else Owner.for_this_process(loopback_url(host, bound))
    hosts = HostPolicy.for_server(
        host, settings.api.api_allowed_hosts, settings.api.api_token is not None
    )
    config = server_config(settings.api, create_app(settings, owner, hosts=hosts), host, bound)
    log.info(f"serving {settings.index_dir} on http://{_hostport(host, bound)}")
    return uvicorn.Server(config), sock


def loopback_url(host: str, port: int) -> str:
    """How a process on this machine reaches a server bound to `host`."""
    if host in ("0.0.0.0", "", "localhost"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://{_hostport(host, port)}"


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _log_access_as_json() -> None:
    access = logging.getLogger("ctxr.api.access")
    if not access.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False  # plain JSON lines, not the CLI's "ctxr: " prefix


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxr")
    except PackageNotFoundError:
        return "0.0.0"
