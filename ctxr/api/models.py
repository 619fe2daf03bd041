"""Request and response bodies of the HTTP API (`ctxr.api.app`). Search answers are the hit
schema every face shares (`ctxr.retrieve.hits`, ``ctxr.hits/1``), not defined here.

The search request's limits come from the settings (`CTXR_API_MAX_*`), so its model is made
per app by `search_request_model`; the limits then appear in the OpenAPI schema as
`maxLength`/`maximum`/`maxItems`, and a request over one is answered 422 naming the field.
Unknown fields are refused too, and so are unknown filter fields (422 naming the field): a
misspelt filter must not come back unfiltered.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

from ctxr.api.filter_schema import FILTERS_SCHEMA
from ctxr.config import FusionMethod, RerankChoice, SearchMode, Settings
from ctxr.errors import ConfigError
from ctxr.index.filters import parse_filters
from ctxr.retrieve.rerank.registry import OFF, RERANKERS, make_reranker


def _exactly_one_of_query_or_queries(schema: dict[str, Any]) -> None:
    """Write the model validator's rule into the schema: a client (or a generator such as
    schemathesis) reading it then knows that a body with both, or neither, is refused.
    Each field may still be sent as null, which means not given."""
    schema["oneOf"] = [
        {
            "title": title,
            "required": [given],
            "properties": {given: {"not": {"type": "null"}}, other: {"type": "null"}},
        }
        for title, given, other in (
            ("one query", "query", "queries"),
            ("a batch of queries", "queries", "query"),
        )
    ]


class SearchRequestBase(BaseModel):
    """Exactly one of `query` (one list of hits back) or `queries` (one list per query)."""

    # Strict: `"k": "5"` or `"k": true` is a client's mistake, answered 422, not guessed at; a
    # string with a lone UTF-16 surrogate ("\ud800", which JSON can carry) is refused too.
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=_exactly_one_of_query_or_queries
    )

    query: str | None = None
    queries: list[str] | None = None
    k: int = 10
    mode: SearchMode = "hybrid"
    fusion: FusionMethod | None = Field(None, description="hybrid fusion; default CTXR_FUSION")
    candidates: int | None = Field(None, description="top-N per retriever before fusion")
    filters: dict[str, Any] | None = Field(
        None,
        json_schema_extra={"anyOf": [FILTERS_SCHEMA, {"type": "null"}]},
        description='payload filters applied inside both retrievers, e.g. {"source": "docs/", '
        '"kind": ["markdown", "text"], "token_count": {"gte": 50}}; see the docs\' "Filter a '
        'search" guide',
    )
    merge: bool = Field(False, description="merge adjacent hits of one document into passages")
    expand: bool = Field(False, description="return each hit's parent section (parent chunking)")
    rerank: RerankChoice | None = Field(
        None, description="reranker over the top CTXR_RERANK_CANDIDATES; default CTXR_RERANK"
    )

    @field_validator("filters")
    @classmethod
    def _filters_parse(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        value = _whole_numbers(value)
        try:
            parse_filters(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _one_of_query_or_queries(self) -> SearchRequestBase:
        if (self.query is None) == (self.queries is None):
            raise ValueError('give exactly one of "query" (a string) or "queries" (a list)')
        return self

    @property
    def texts(self) -> list[str]:
        return [self.query] if self.query is not None else list(self.queries or [])


def _whole_numbers(value: Any) -> Any:
    """`5.0` read as `5`: JSON has one number type, so a schema's "integer" admits 5.0, and
    a client that writes it means 5. A fraction stays a float and is refused where an integer
    is needed."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


WholeNumber = BeforeValidator(_whole_numbers)  # after Field(ge=, le=) in Annotated, or the
# schema loses minimum/maximum


def search_request_model(settings: Settings) -> type[SearchRequestBase]:
    """`SearchRequestBase` with this server's limits on query length, batch size, k, depth."""
    text = Annotated[
        str, Field(min_length=1, max_length=settings.api.api_max_query_chars, pattern=r"\S")
    ]
    model: type[SearchRequestBase] = create_model(
        "SearchRequest",
        __base__=SearchRequestBase,
        query=(text | None, None),
        queries=(
            Annotated[list[text], Field(min_length=1, max_length=settings.api.api_max_batch)]
            | None,
            None,
        ),
        k=(Annotated[int, Field(ge=1, le=settings.api.api_max_k), WholeNumber], 10),
        candidates=(
            Annotated[int, Field(ge=1, le=settings.api.api_max_candidates), WholeNumber] | None,
            Field(None, description="top-N per retriever before fusion; default CTXR_CANDIDATES"),
        ),
        # Any name is read (one this server cannot use is answered 422 with what it needs),
        # but the schema offers only those it can use.
        rerank=(
            RerankChoice | None,
            Field(
                None,
                description="reranker over the top CTXR_RERANK_CANDIDATES; default CTXR_RERANK",
                json_schema_extra={"enum": [*usable_rerankers(settings), None]},
            ),
        ),
    )
    return model


def usable_rerankers(settings: Settings) -> list[str]:
    """The rerankers this server can make (a provider, a URL, a model on disk), and "none";
    nothing is loaded to find out."""
    usable = []
    for name in RERANKERS:
        try:
            if name == "cross-encoder":  # making it would load the model: look for its files
                from ctxr.retrieve.rerank.cross_encoder import model_files

                model_files(settings.search.rerank_model_path)
            else:
                make_reranker(name, settings)
        except ConfigError:
            continue
        usable.append(name)
    return [*usable, OFF]


class ChunkModel(BaseModel):
    chunk_id: str
    index: int
    start: int
    end: int
    token_count: int | None = None
    heading_path: list[str]
    prefix: str = Field(description="repeated text prepended when embedding (never in `text`)")
    text: str
    context: str
    context_kind: str | None = None


class DocumentResponse(BaseModel):
    doc_id: str
    source: str
    title: str | None = None
    kind: str | None = None
    language: str | None = None
    sha256: str | None = None
    indexed_at: str | None = None
    chunks: list[ChunkModel]


class HealthResponse(BaseModel):
    status: str = Field(description='"ok", or "unavailable" with the reason (503)')
    reason: str | None = None


class StatsResponse(BaseModel):
    index_dir: str
    backend: str
    points: int
    documents: int
    settings: dict[str, Any] = Field(description="what the stored vectors were made with")
    search: dict[str, Any] = Field(description="search defaults and this server's limits")
    created_at: str
    updated_at: str
    age_seconds: float = Field(description="seconds since the index was last written")


class ErrorResponse(BaseModel):
    detail: Any
