"""`EdgeStore`: Qdrant's own engine in-process (qdrant-edge-py), on disk under the index dir.

Dense vectors use cosine distance; the BM25 sparse vector carries our term weights and Qdrant's
IDF modifier supplies the IDF, computed over the live points at query time, so deletions and
additions keep IDF exact without re-weighting stored points.

The binding raises plain exceptions; a read or write that fails on a shard that opened is damage
on disk (a truncated vector file, a garbled payload page), so each call turns them into an
`IndexCorruptError` that names the index directory and the fix, never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import qdrant_edge as qe

from ctxr.errors import CtxrError, IndexError_, IndexInUseError
from ctxr.index.bm25.weights import SparseTerms
from ctxr.index.filters import AllOf, AnyOf, Condition, PayloadFilter, Range, match_values
from ctxr.index.integrity import corrupt
from ctxr.index.payload import KEYWORD_FIELDS, ChunkPayload
from ctxr.index.store.base import (
    DENSE_VECTOR,
    DOCUMENT_VECTOR,
    SCROLL_PAGE,
    SPARSE_VECTOR,
    ScannedPoint,
    ScoredRecord,
    StoredPoint,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SHARD_DIR = "qdrant"  # the shard's directory under the index directory
# The directory qdrant-edge locks while a shard is loaded (its write-ahead log).
WAL_DIR = "wal"


class EdgeStore:
    def __init__(self, shard: Any, hnsw_ef: int = 256, path: Path | None = None) -> None:
        self._shard = shard
        self._params = qe.SearchParams(hnsw_ef=hnsw_ef)
        self._index_dir = path.parent if path is not None else Path("?")

    @contextmanager
    def _guarded(self, action: str) -> Iterator[None]:
        try:
            yield
        except CtxrError:
            raise
        except Exception as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            raise corrupt(self._index_dir, f"{action} failed: {lines[0][:300]}") from exc

    @classmethod
    def create(cls, path: Path, dim: int, hnsw_ef: int = 256) -> EdgeStore:
        config = qe.EdgeConfig(
            vectors={DENSE_VECTOR: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            sparse_vectors={
                name: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)
                for name in (SPARSE_VECTOR, DOCUMENT_VECTOR)
            },
        )
        path.mkdir(parents=True, exist_ok=True)
        try:
            shard = qe.EdgeShard.create(str(path), config)
        except Exception as exc:  # the binding raises plain exceptions with Qdrant's message
            raise IndexError_(
                f"cannot create the Qdrant shard at {path}: {exc}; "
                "remove the directory or choose another --index"
            ) from exc
        for field in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        return cls(shard, hnsw_ef, path)

    @classmethod
    def open(cls, path: Path, hnsw_ef: int = 256) -> EdgeStore:
        try:
            shard = qe.EdgeShard.load(str(path))
        except Exception as exc:
            if "WouldBlock" in str(exc):
                # Qdrant's write-ahead log is locked: the shard is healthy but open elsewhere
                # (`factory.open_store` names the server that owns it, if one does).
                raise IndexInUseError(
                    f"the index at {path.parent} is in use by another ctxr process (a running "
                    "`ctxr index`, `ctxr watch` update, `ctxr mcp` or a Python program); wait "
                    "for it to finish or stop it, then retry"
                ) from exc
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            what = f"its Qdrant shard cannot be opened: {lines[0][:300]}"
            raise corrupt(path.parent, what) from exc
        return cls(shard, hnsw_ef, path)

    @staticmethod
    def held(path: Path) -> bool:
        """Whether some process (this one included) has the shard at `path` open.

        qdrant-edge holds an exclusive `flock` on the shard's `wal` directory while it is
        loaded; a lock we can take (and drop at once) means nobody has it. Asked only when an
        owner file claims the shard, so the probe cannot get in the way of ordinary opens.
        """
        if fcntl is None:  # pragma: no cover - Windows: no flock; believe the owner file
            return True
        try:
            fd = os.open(path / WAL_DIR, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's lock, if it took one
        return False

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        if not points:
            return
        edge_points = [qe.Point(p.point_id, _vectors(p), dict(p.payload)) for p in points]
        with self._guarded("writing points"):
            self._shard.update(qe.UpdateOperation.upsert_points(edge_points))

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        match = qe.FieldCondition("doc_id", match=qe.MatchAny(list(doc_ids)))
        with self._guarded("deleting points"):
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(qe.Filter(must=[match])))

    def query_dense(
        self, vector: Sequence[float], limit: int, where: PayloadFilter | None = None
    ) -> list[ScoredRecord]:
        query = qe.Query.Nearest([float(x) for x in vector], using=DENSE_VECTOR)
        return self._query(query, limit, where)

    def query_sparse(
        self, sparse: SparseTerms, limit: int, where: PayloadFilter | None = None
    ) -> list[ScoredRecord]:
        return self._query_terms(sparse, SPARSE_VECTOR, limit, where)

    def query_documents(
        self, sparse: SparseTerms, limit: int, where: PayloadFilter | None = None
    ) -> list[ScoredRecord]:
        return self._query_terms(sparse, DOCUMENT_VECTOR, limit, where)

    def _query_terms(
        self, sparse: SparseTerms, using: str, limit: int, where: PayloadFilter | None
    ) -> list[ScoredRecord]:
        if not sparse.indices:
            return []  # a query of only stop words matches nothing; Qdrant would reject it
        vector = qe.SparseVector(sparse.indices, sparse.values)
        return self._query(qe.Query.Nearest(vector, using=using), limit, where)

    def _query(self, query: Any, limit: int, where: PayloadFilter | None) -> list[ScoredRecord]:
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            filter=edge_filter(where),
            with_payload=True,
            with_vector=False,
            params=self._params,
        )
        with self._guarded("a search"):
            return [
                ScoredRecord(str(p.id), float(p.score), _payload(p.payload))
                for p in self._shard.query(request)
            ]

    def count(self) -> int:
        with self._guarded("counting points"):
            return int(self._shard.count(qe.CountRequest(exact=True)))

    def document_points(self, doc_id: str) -> list[ScoredRecord]:
        match = qe.Filter(must=[qe.FieldCondition("doc_id", match=qe.MatchValue(doc_id))])
        records: list[ScoredRecord] = []
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=match, with_payload=True, with_vector=False
            )
            with self._guarded("reading a document"):
                page, offset = self._shard.scroll(request)
            records.extend(ScoredRecord(str(p.id), 0.0, _payload(p.payload)) for p in page)
            if offset is None:
                break
        return sorted(records, key=lambda r: int(r.payload.get("index", 0)))

    def scan(self, limit: int | None = None) -> Iterator[list[ScannedPoint]]:
        offset: Any = None
        left = limit
        while left is None or left > 0:
            size = SCROLL_PAGE if left is None else min(SCROLL_PAGE, left)
            request = qe.ScrollRequest(
                offset=offset, limit=size, with_payload=True, with_vector=True
            )
            with self._guarded("reading points"):
                page, offset = self._shard.scroll(request)
                points = [_scanned(p) for p in page]
            yield points
            left = None if left is None else left - len(points)
            if offset is None or not points:
                break

    def optimize(self) -> bool:
        with self._guarded("building the HNSW index"):
            return bool(self._shard.optimize())

    def flush(self) -> None:
        with self._guarded("flushing"):
            self._shard.flush()

    def close(self) -> None:
        self._shard.close()


def _vectors(point: StoredPoint) -> dict[str, Any]:
    vectors: dict[str, Any] = {
        DENSE_VECTOR: [float(x) for x in point.dense],
        SPARSE_VECTOR: qe.SparseVector(point.sparse.indices, point.sparse.values),
    }
    if point.document is not None and point.document.indices:
        # Only carriers hold it: a point without it does not count in its IDF's N.
        vectors[DOCUMENT_VECTOR] = qe.SparseVector(point.document.indices, point.document.values)
    return vectors


def edge_filter(spec: PayloadFilter | None) -> Any:
    """The parsed filter as a qdrant-edge `Filter` (None for no filter)."""
    if spec is None:
        return None
    import qdrant_edge as qe

    def condition(c: Condition) -> Any:
        if isinstance(c, AllOf):
            return qe.Filter(must=[condition(x) for x in c.conditions])
        if isinstance(c, AnyOf):
            return qe.Filter(should=[condition(x) for x in c.conditions])
        if isinstance(c, Range):
            return qe.FieldCondition(c.key, range=qe.RangeFloat(c.gte, c.gt, c.lte, c.lt))
        if len(c.values) == 1:
            return qe.FieldCondition(c.key, match=qe.MatchValue(c.values[0]))
        return qe.FieldCondition(c.key, match=qe.MatchAny(match_values(c)))

    return condition(spec)


def _scanned(point: Any) -> ScannedPoint:
    vectors = point.vector or {}
    sparse = vectors.get(SPARSE_VECTOR)
    document = vectors.get(DOCUMENT_VECTOR)
    return ScannedPoint(
        str(point.id),
        list(vectors.get(DENSE_VECTOR) or []),
        SparseTerms(list(sparse.indices), list(sparse.values)) if sparse else SparseTerms([], []),
        _payload(point.payload),
        SparseTerms(list(document.indices), list(document.values)) if document else None,
    )


def _payload(stored: dict[str, Any] | None) -> ChunkPayload:
    # What the store gives back is what `chunk_payload` wrote; Qdrant keeps JSON, not types.
    return cast(ChunkPayload, dict(stored or {}))
