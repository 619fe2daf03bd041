"""The MCP server (`ctxr mcp`): an index's search as tools an agent can call.

Built on the official `mcp` SDK (2.x, `MCPServer`; the `mcp` extra). Three tools and one
resource, over stdio (one client: Claude Desktop, Claude Code, an IDE; every line it sends is
answered, `ctxr.api.mcp_stdio`) or the streamable HTTP transport (`ctxr mcp --http HOST:PORT`),
which sits behind the same `Guard` and uvicorn protocol as `ctxr serve`: the Host check
(`ctxr.api.hosts`, 421), the bearer token `CTXR_API_TOKEN`, the body limit and deadline, the
connection cap and the JSON access log. Its sessions are capped (`CTXR_MCP_MAX_SESSIONS`; one
more is answered 503) and one left idle for `CTXR_MCP_SESSION_IDLE_TIMEOUT` seconds is closed
(its id then answers 404 and the client starts a new one).

- `search`: the hybrid search of the HTTP API's POST /search, answered in the hit schema every
  face shares (`ctxr.retrieve.hits`, ``ctxr.hits/1``).
- `get_document`: a document's chunks in order, each with its context, a page at a time.
- `get_passage`: the exact text around a hit, rebuilt from the index (`ctxr.retrieve.around`).
- resource `ctxr://index/stats`: what GET /stats answers.

The index opens on the first call and stays open; a call that finds no index (or one that does
not match the settings) gets a tool error saying so and what to run, and the next call tries
again, so an agent started before `ctxr index` recovers without a restart. Bad arguments are
refused by the SDK's argument model before any tool runs, as a tool error naming the field.

No `from __future__ import annotations` here: the SDK reads the tools' signatures, whose
limits come from the settings of this server (closure variables a string annotation loses).
"""

import json
import logging
import threading
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AfterValidator, BaseModel, Field
from starlette.types import ASGIApp

from ctxr.api.guard import Guard
from ctxr.api.hosts import HostPolicy
from ctxr.api.mcp_strict import StrictTools
from ctxr.api.models import DocumentResponse
from ctxr.api.stats import stats_response
from ctxr.client import Client
from ctxr.config import Settings
from ctxr.errors import ConfigError, CtxrError
from ctxr.index.filters import parse_filters
from ctxr.retrieve.hits import Asked, HitsResult, hits_result
from ctxr.retrieve.searcher import SearchOptions
from ctxr.retrieve.service import SearchService

log = logging.getLogger("ctxr.mcp")
STATS_URI = "ctxr://index/stats"
MCP_PATH = "/mcp"

INSTRUCTIONS = """\
Search a local document index (docs, code, notes) built with ctxr. Start with `search`; every
hit names its document (`doc_id`, `source`), its section (`heading_path`) and its character
span (`start`, `end`). Use `get_passage` with a hit's doc_id/start/end when the hit is cut off
or you need the surrounding text, and `get_document` to read a whole document in order. Cite
hits by source and heading."""

SEARCH_DOC = """\
Search the index for chunks relevant to a question or keywords; returns up to k hits, best
first. Each hit has `text` (the chunk, verbatim from the source), `context` (one or two
sentences situating it in its document), `source` and `doc_id` (the file), `heading_path` (the
section trail or code symbol), `start`/`end` (character offsets in the document), `pages` (for
a PDF) and `score`; `warnings` says when hits are not as asked.
Modes: "hybrid" (default; meaning and exact words), "bm25" (exact identifiers, error codes,
names), "dense" (paraphrases, concepts). Use `filters` to restrict by payload fields, e.g.
{"source": "docs/"} (a path prefix), {"kind": ["markdown", "code"]}, {"language": "python"},
{"natural_language": "ja"} (a prose document's detected language), {"token_count": {"gte": 50}}.
Set merge=true to join adjacent hits of one document."""

DOCUMENT_DOC = """\
Read one indexed document in order: its chunks with their contexts, headings and offsets.
`doc_id` is a hit's `doc_id` (the source path). Long documents come a page at a time: pass
`first_chunk` = the previous answer's `next_chunk` to continue (null when done). Prefer
`get_passage` when you only need the text around one hit."""

PASSAGE_DOC = """\
The exact text of a document around a span, typically a search hit's `doc_id`, `start` and
`end`, with `window` characters before and after (default 600). Use it when a hit starts or
ends mid-thought, or to read what precedes a code symbol or follows a heading. Offsets in the
answer are the document's own, so a wider window can be asked for the same span."""


class DocumentPage(DocumentResponse):
    total_chunks: int
    next_chunk: int | None = Field(description="first_chunk for the next page; null when done")


class Passage(BaseModel):
    doc_id: str
    source: str
    start: int
    end: int
    heading_path: list[str]
    text: str = Field(description="exactly the document's text from start to end")


class IndexHolder:
    """The server's one search service, opened on first use; a failed open is retried on the
    next call rather than remembered, so building the index later needs no restart."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = Client(settings=settings)  # the one search client (`ctxr.client`)
        self._lock = threading.Lock()

    def get(self) -> SearchService:
        with self._lock:
            try:
                return self.client.service
            except CtxrError as exc:
                raise ToolError(str(exc)) from None
            except Exception as exc:  # a broken shard may raise anything; say so, not crash
                log.exception("cannot open the index")
                raise ToolError(
                    f"cannot open the index at {self.settings.index_dir}: {exc!r}"
                ) from None

    def close(self) -> None:
        with self._lock:
            self.client.close()


def _valid_filters(value: dict[str, Any] | None) -> dict[str, Any] | None:
    try:
        parse_filters(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


def create_server(settings: Settings, holder: IndexHolder | None = None) -> MCPServer:
    """The MCP server over the index `settings` names (tools, resource, instructions)."""
    holder = holder or IndexHolder(settings)
    query_text = Annotated[
        str,
        Field(min_length=1, max_length=settings.api.api_max_query_chars, pattern=r"\S",
              description="what to look for: a question, keywords or an identifier"),
    ]  # fmt: skip
    strict = StrictTools()  # unknown arguments refused, refusals in words, read-only hints

    @strict.tool("Search the index", SEARCH_DOC)
    def search(
        query: query_text,
        k: Annotated[int, Field(ge=1, le=settings.api.api_max_k, description="hits wanted")] = 8,
        mode: Literal["hybrid", "dense", "bm25"] = "hybrid",
        filters: Annotated[
            dict[str, Any] | None,
            AfterValidator(_valid_filters),
            Field(description='payload filters, e.g. {"source": "docs/"}'),
        ] = None,
        merge: bool = False,
    ) -> HitsResult:
        holder.get()  # an index that cannot open is a tool error saying why
        try:
            hits = holder.client.search(query, SearchOptions(k, mode, filters=filters, merge=merge))
        except CtxrError as exc:
            raise ToolError(str(exc)) from None
        return hits_result(query, hits, Asked(mode, settings.search.fusion, k, merge))

    @strict.tool("Read a document", DOCUMENT_DOC)
    def get_document(
        doc_id: Annotated[str, Field(min_length=1, description="a hit's doc_id")],
        first_chunk: Annotated[int, Field(ge=0, description="index of the first chunk")] = 0,
        max_chunks: Annotated[int, Field(ge=1, le=200, description="chunks per page")] = 40,
    ) -> DocumentPage:
        found = _call(lambda: holder.get().document(doc_id))
        if found is None:
            raise ToolError(_unknown(doc_id))
        chunks = found["chunks"]
        if first_chunk >= len(chunks) > 0:  # an empty page would read as an empty document
            raise ToolError(
                f"first_chunk {first_chunk} is past the end of {_shown(doc_id)!r}, which has "
                f"{len(chunks)} chunks (0 to {len(chunks) - 1}); start from 0, or pass the "
                "previous page's next_chunk"
            )
        page = chunks[first_chunk : first_chunk + max_chunks]
        after = first_chunk + len(page)
        return DocumentPage.model_validate(
            {**found, "chunks": page, "total_chunks": len(chunks),
             "next_chunk": after if after < len(chunks) else None}
        )  # fmt: skip

    @strict.tool("Read the text around a hit", PASSAGE_DOC)
    def get_passage(
        doc_id: Annotated[str, Field(min_length=1, description="a hit's doc_id")],
        start: Annotated[int, Field(ge=0, description="a hit's start offset")],
        end: Annotated[int, Field(ge=1, description="a hit's end offset (after start)")],
        window: Annotated[int, Field(ge=0, le=20_000, description="characters each side")] = 600,
    ) -> Passage:
        if end <= start:
            raise ToolError(f"end ({end}) must be greater than start ({start})")
        service = holder.get()
        found = _call(lambda: service.passage(doc_id, start, end, window))
        if found is None:
            if _call(lambda: service.document(doc_id)) is None:
                raise ToolError(_unknown(doc_id))
            raise ToolError(
                f"no indexed text at {start}-{end} of {doc_id!r}; take start and end from a "
                "search hit or a get_document chunk"
            )
        source = str(found.pop("source", doc_id))
        return Passage.model_validate({"doc_id": doc_id, "source": source, **found})

    server = MCPServer("ctxr", instructions=INSTRUCTIONS, version=_version(), tools=strict.tools)

    @server.resource(
        STATS_URI,
        name="index-stats",
        description="The index: points, documents, what it was built with, search limits, age",
        mime_type="application/json",
    )
    def index_stats() -> str:
        service = holder.get()
        return json.dumps(_call(lambda: stats_response(service, settings)).model_dump())

    return server


def _call(work: Any) -> Any:
    """Run `work`; a deliberate ctxr error (a store that went away) becomes a tool error."""
    try:
        return work()
    except CtxrError as exc:
        raise ToolError(str(exc)) from None


def _unknown(doc_id: str) -> str:
    shown = _shown(doc_id)
    return f"no document {shown!r} in the index; use a search hit's doc_id (its source path)"


def _shown(doc_id: str) -> str:
    return doc_id if len(doc_id) <= 200 else doc_id[:200] + "..."


def http_app(settings: Settings, server: MCPServer, host: str) -> ASGIApp:
    """The streamable HTTP app at /mcp, behind the API's guard (hosts, token, body, log)."""
    token = settings.api.api_token.get_secret_value() if settings.api.api_token else None
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        # The guard checks Host and Origin for both servers, with the user's allowed names;
        # the SDK's own check knows only the loopback names.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_sessions=settings.api.mcp_max_sessions,
        session_idle_timeout=settings.api.mcp_session_idle_timeout,
    )
    return Guard(
        app,
        token=token,
        max_body_bytes=settings.api.api_max_body_bytes,
        log_requests=settings.api.api_access_log,
        open_paths=frozenset(),
        hosts=HostPolicy.for_server(host, settings.api.api_allowed_hosts, token is not None),
        body_timeout=settings.api.api_body_timeout,
    )


def serve_stdio(settings: Settings) -> None:
    """Serve one client over stdin/stdout until it closes the pipe."""
    import anyio

    from ctxr.api.mcp_stdio import serve_stdio_answering

    holder = IndexHolder(settings)
    try:
        anyio.run(serve_stdio_answering, create_server(settings, holder))
    finally:
        holder.close()


def serve_http(settings: Settings, host: str, port: int) -> None:
    """Serve the streamable HTTP transport on uvicorn until interrupted."""
    import anyio
    import uvicorn

    from ctxr.api.protocol import server_config

    holder = IndexHolder(settings)
    app = http_app(settings, create_server(settings, holder), host)
    config = server_config(settings.api, app, host, port)
    try:
        anyio.run(uvicorn.Server(config).serve)
    finally:
        holder.close()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxr")
    except PackageNotFoundError:
        return "0.0.0"
