"""The store protocol: one point per chunk, a named dense vector and a BM25 sparse vector.

A second sparse vector, `bm25_doc`, holds a whole document's BM25 terms; only one point per
short document carries it (its first chunk, the "carrier"), so Qdrant's IDF modifier counts
documents there, not chunks (`ctxr.index.bm25.documents`). A collection made before it has
no such vector; the manifest says which (`Manifest.document_vectors`).

Backends (the embedded `EdgeStore`, `QdrantServerStore` for a Qdrant server or cluster) share
this schema, so the indexer and the retriever never know which one they talk to;
`ctxr.index.components` picks one from the settings. `optimize()` returns whether it built an
index (a server builds its own, so there it is a no-op returning False); `flush()` makes
written points durable before the manifest records them. `scan()` reads every stored point
back, vectors included, for the integrity check (`ctxr.index.integrity`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ctxr.index.bm25.weights import SparseTerms
from ctxr.index.filters import PayloadFilter
from ctxr.index.payload import ChunkPayload

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"
DOCUMENT_VECTOR = "bm25_doc"
# Points fetched per scroll page when listing one document's chunks.
SCROLL_PAGE = 256
# The payload fields a search reads from every retriever's candidates: fusion lands documents
# by `doc_id`, merging bridges gaps with `space_after`, expansion finds parent sections. The
# whole payload (text, context and all) is read only for the hits returned (`Store.payloads`):
# the engine decodes a whole payload to give any field of it, about 8 us a point, and a hybrid
# search has up to 3 x candidates of them.
RANKING_FIELDS: Final = ("doc_id", "space_after", "parent_start", "parent_end")


@dataclass(frozen=True, slots=True)
class StoredPoint:
    point_id: str
    dense: Sequence[float]
    sparse: SparseTerms
    payload: ChunkPayload
    # The whole document's BM25 vector, on its carrier point only (None elsewhere).
    document: SparseTerms | None = None


@dataclass(frozen=True, slots=True)
class ScoredRecord:
    """A point a query found. Its payload is whole unless the query named `fields`: then it
    holds only those keys (`RANKING_FIELDS` for a search's candidates)."""

    point_id: str
    score: float
    payload: ChunkPayload


@dataclass(frozen=True, slots=True)
class ScannedPoint:
    """A point as read back from the store: what the integrity check looks at."""

    point_id: str
    dense: Sequence[float]
    sparse: SparseTerms
    payload: ChunkPayload
    document: SparseTerms | None = None  # a carrier's whole-document BM25 vector


def best_first(records: Sequence[ScoredRecord]) -> list[ScoredRecord]:
    """Records by score, equal scores by point id. The engine orders equal scores as its
    segments happen to lie, which differs from one build of an index to the next (identical
    chunk texts score identically under BM25): a search must answer the same on both."""
    return sorted(records, key=lambda r: (-r.score, r.point_id))


class Store(Protocol):
    def upsert(self, points: Sequence[StoredPoint]) -> None: ...

    def delete_documents(self, doc_ids: Sequence[str]) -> None: ...

    def query_dense(
        self,
        vector: Sequence[float],
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]:
        """The `limit` nearest points among those `where` admits (inside the search), with
        their whole payload or, given `fields`, only those keys of it."""
        ...

    def query_sparse(
        self,
        sparse: SparseTerms,
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]: ...

    def query_documents(
        self,
        sparse: SparseTerms,
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]:
        """The `limit` best carrier points by whole-document BM25 (`DOCUMENT_VECTOR`)."""
        ...

    def payloads(self, point_ids: Sequence[str]) -> dict[str, ChunkPayload]:
        """The whole payload of each of `point_ids` the store holds (others are left out)."""
        ...

    def count(self) -> int: ...

    def document_points(self, doc_id: str) -> list[ScoredRecord]:
        """Every point of one document, in chunk order (payload `index`); score 0.0."""
        ...

    def scan(self, limit: int | None = None) -> Iterator[list[ScannedPoint]]:
        """Pages of stored points with their vectors, at most `limit` points in all."""
        ...

    def payload_fields(self, keys: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
        """Pages of every point's payload, only `keys` of it (no vectors, no text unless
        asked): what an overview of the whole index reads."""
        ...

    def optimize(self) -> bool: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
