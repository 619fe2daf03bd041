"""The store protocol: one point per chunk, a named dense vector and a BM25 sparse vector.

Backends (the embedded `EdgeStore`; a Qdrant server later) share this schema, so the indexer
and the retriever never know which one they talk to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxr.index.bm25 import SparseTerms

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"


@dataclass(frozen=True, slots=True)
class StoredPoint:
    point_id: str
    dense: Sequence[float]
    sparse: SparseTerms
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScoredRecord:
    point_id: str
    score: float
    payload: dict[str, Any]


class Store(Protocol):
    def upsert(self, points: Sequence[StoredPoint]) -> None: ...

    def delete_documents(self, doc_ids: Sequence[str]) -> None: ...

    def query_dense(self, vector: Sequence[float], limit: int) -> list[ScoredRecord]: ...

    def query_sparse(self, sparse: SparseTerms, limit: int) -> list[ScoredRecord]: ...

    def count(self) -> int: ...

    def optimize(self) -> bool: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
