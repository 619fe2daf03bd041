"""The one hit schema every face writes: `ctxr search --json` and `--queries`, `POST /search`,
the MCP `search` tool and the framework adapters (`ctxr.integrations`).

A search answers with a `HitsResult`, versioned by its `schema` field (``ctxr.hits/1``): the
query, how it was searched (mode, fusion, k, merge, expand), warnings that concern the whole
answer (a hit flag, said once: `--expand` on an index not built with `--chunking parent`, a
reranker that failed), and the hits best first. Each hit says where it comes from (source,
doc_id, heading trail, character offsets, PDF pages), what it says (text, context), why it
ranks (fused score, each retriever's score and rank) and how it was shaped (`expanded`,
`flags`). Every key is always present, with an empty list or null when it has nothing to say,
so a client reads one shape. A change that removes or retypes a key is a new version
(``ctxr.hits/2``); adding a key is not. docs/reference/hits.md documents it.

`hits_result` builds the model and `result_json` serialises it: the CLI, the HTTP API and the
MCP server call these two and nothing else, so the shape cannot drift between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ctxr.config import FusionMethod, SearchMode
from ctxr.types import Hit, RetrieverScore

HITS_SCHEMA: Final = "ctxr.hits/1"

# The hit model is `ctxr.types.Hit`, the one the search service returns; pydantic reads its
# fields and descriptions for the schema, so a hit written here is the hit the Python API gave.
# The schema's own names for its parts, kept for code that imports them: the same classes.
HitRecord = Hit
ScoreRecord = RetrieverScore
_HIT: Final = TypeAdapter(Hit)


class HitsResult(BaseModel):
    """One query's answer: `ctxr.hits/1`."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, serialize_by_alias=True)

    schema_: Literal["ctxr.hits/1"] = Field(HITS_SCHEMA, alias="schema")
    id: str | None = Field(description="the query's id from `search --queries`; else null")
    query: str
    mode: SearchMode
    fusion: FusionMethod | None = Field(description="the hybrid fusion used; null otherwise")
    k: int = Field(description="hits asked for (merging may give fewer)")
    merge: bool
    expand: bool = Field(description="parent sections were asked for; see hits' `expanded`")
    warnings: list[str] = Field(description="each distinct hit flag once, for a person to read")
    hits: list[Hit]


class HitsBatch(BaseModel):
    """Several queries' answers (`POST /search` with "queries"), in the order asked."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, serialize_by_alias=True)

    schema_: Literal["ctxr.hits/1"] = Field(HITS_SCHEMA, alias="schema")
    results: list[HitsResult]


@dataclass(frozen=True, slots=True)
class Asked:
    """How a search was asked for, as its answer reports it."""

    mode: str
    fusion: str | None  # the hybrid fusion used (the request's, else the configured one)
    k: int
    merge: bool = False
    expand: bool = False


def hits_result(
    query: str, hits: Sequence[Hit], asked: Asked, query_id: str | None = None
) -> HitsResult:
    """The answer to one query; `fusion` is kept only for hybrid search, where it applies."""
    warnings = list(dict.fromkeys(flag for hit in hits for flag in hit.flags))
    return HitsResult.model_validate(
        {
            "id": query_id,
            "query": query,
            "mode": asked.mode,
            "fusion": asked.fusion if asked.mode == "hybrid" else None,
            "k": asked.k,
            "merge": asked.merge,
            "expand": asked.expand,
            "warnings": warnings,
            "hits": list(hits),
        }
    )


def result_json(result: HitsResult | HitsBatch) -> dict[str, Any]:
    """The JSON object of an answer, exactly as every face writes it."""
    return result.model_dump(mode="json", by_alias=True)


def result_bytes(result: HitsResult | HitsBatch) -> bytes:
    """`result_json` as compact UTF-8 JSON, serialised by pydantic in one step: for an
    answer of 10 hits about 25 µs, against 105 µs for `result_json` and `json.dumps`."""
    return result.model_dump_json(by_alias=True).encode("utf-8")


def hit_json(hit: Hit) -> dict[str, Any]:
    """One hit's JSON object (the framework adapters' unit)."""
    data: dict[str, Any] = _HIT.dump_python(hit, mode="json")
    return data


def hit_from_json(data: Any) -> Hit:
    """The `Hit` a `ctxr.hits/1` hit object describes (a served search's answer, shown as a
    local one); raises pydantic's ValidationError for anything else."""
    hit: Hit = _HIT.validate_python(data)
    return hit
