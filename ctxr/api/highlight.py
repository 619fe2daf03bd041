"""`POST /highlight`: which words of some texts BM25 matched a query on.

The page at `/` marks them in each hit's text and context, and in the hit's chunk in the
document view; any client may ask the same. The words are found by the index's own analyzer
(`ctxr.retrieve.highlight`), so "migrations" is marked for the query "migration" and "the" for
none. Offsets count code points, as Python's strings do (a browser's strings count UTF-16
units: characters beyond the Basic Multilingual Plane, emoji among them, count two there).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.concurrency import run_in_threadpool

from ctxr.api.holder import ServiceHolder
from ctxr.api.models import ErrorResponse

PATH = "/highlight"
MAX_TEXTS = 200  # a page of hits' texts and contexts, or a document's chunks


class HighlightRequestBase(BaseModel):
    # Strict and closed, as the search request: a client's mistake is a 422 naming the field.
    model_config = ConfigDict(extra="forbid", strict=True)

    query: str
    texts: list[str] = Field(max_length=MAX_TEXTS, description="the texts to mark")


# A span as a two-item list, not a tuple: /openapi.json wrote a tuple's item schemas as a list
# under `items`, which OpenAPI 3.1 refuses (schemathesis stopped at it).
Span = Annotated[list[int], Field(min_length=2, max_length=2)]


class HighlightResponse(BaseModel):
    terms: list[str] = Field(description="the query's BM25 terms, in order, each once")
    spans: list[list[Span]] = Field(
        description="per text, in the order sent: the [start, end) code-point spans of the "
        "words that share a term with the query, ascending"
    )


def highlight_request_model(max_query_chars: int) -> type[HighlightRequestBase]:
    """The request with this server's limit on query length (`CTXR_API_MAX_QUERY_CHARS`)."""
    model: type[HighlightRequestBase] = create_model(
        "HighlightRequest",
        __base__=HighlightRequestBase,
        query=(Annotated[str, Field(min_length=1, max_length=max_query_chars)], ...),
    )
    return model


def add_highlight_route(app: FastAPI, holder: ServiceHolder, max_query_chars: int) -> None:
    answers: dict[int | str, dict[str, Any]] = {
        422: {"model": ErrorResponse, "description": "a field not as the schema says"},
        503: {"model": ErrorResponse, "description": "the index cannot be used"},
    }

    async def highlight(body: HighlightRequestBase) -> HighlightResponse:
        """The words of each text that share a BM25 term with the query (what the page marks)."""

        def mark() -> HighlightResponse:
            with holder.lease() as service:
                found = service.highlight(body.query, body.texts)
            spans = [[[start, end] for start, end in text] for text in found.spans]
            return HighlightResponse(terms=found.terms, spans=spans)

        return await run_in_threadpool(mark)

    # The body's limits come from the settings, so its model is made here (as /search's).
    highlight.__annotations__["body"] = highlight_request_model(max_query_chars)
    app.post(PATH, responses=answers)(highlight)
