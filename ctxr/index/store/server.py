"""`QdrantServerStore`: the same collection schema as `EdgeStore`, on a Qdrant server or cluster.

Talks to Qdrant through `qdrant-client` (the `server` extra). The collection holds one point
per chunk: the named dense vector `dense` (cosine), the sparse vector `bm25` with Qdrant's IDF
modifier (and `bm25_doc`, the whole-document BM25 of short documents' first chunks; a
collection made before it lacks it and is still read), the payload `ctxr.index.payload`
defines, and keyword indexes on `doc_id` and `source`. Writes wait for the server's
acknowledgement, so `flush()` has nothing left to do and the manifest
(a local file, as with the edge backend) never claims more than the server holds. A server
builds its HNSW index by itself, so `optimize()` does nothing and says so by returning False.

Reaching the server (its URL, the client, its errors) is `server_client`'s.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, cast

from qdrant_client import QdrantClient, models

from ctxr.config import Quantization
from ctxr.errors import IndexError_, IndexMismatchError, IndexNotFoundError
from ctxr.index.bm25.weights import SparseTerms
from ctxr.index.filters import AllOf, AnyOf, Condition, Not, PayloadFilter, Range, match_values
from ctxr.index.payload import KEYWORD_FIELDS, ChunkPayload
from ctxr.index.store.base import (
    DENSE_VECTOR,
    DOCUMENT_VECTOR,
    SCROLL_PAGE,
    SPARSE_VECTOR,
    ScannedPoint,
    ScoredRecord,
    StoredPoint,
    best_first,
)
from ctxr.index.store.quantization import OVERSAMPLING, QUANTILE
from ctxr.index.store.server_client import server_errors
from ctxr.index.store.server_writes import WritePolicy, write_batches

UPSERT_BATCH = 256  # points per request: keeps request bodies well under a server's limits

# qdrant-client's local mode (file: URLs, tests) says it has no payload indexes and ignores
# `hnsw_ef`: both true, and beside the point there, since it searches exhaustively.
warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
warnings.filterwarnings("ignore", message="Local mode performs exact")


def _local_mode(client: QdrantClient) -> bool:
    options = client.init_options
    return options.get("location") == ":memory:" or options.get("path") is not None


class QdrantServerStore:
    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        *,
        where: str = "qdrant-client",
        hnsw_ef: int = 256,
        rescore: bool = True,
        owns_client: bool = True,
        secret: str | None = None,
        writes: WritePolicy | None = None,
    ) -> None:
        self._client = client
        self._writes = writes or WritePolicy()
        if _local_mode(client):
            # qdrant-client's local mode (file: URLs, tests) is one Python object, not a
            # server: two upserts at once corrupt its arrays.
            self._writes = replace(self._writes, parallel=1)
        self._collection = collection
        self._where = where
        # Qdrant ignores the quantization parameters where the vectors are not quantized.
        rescoring = models.QuantizationSearchParams(
            rescore=rescore, oversampling=OVERSAMPLING if rescore else None
        )
        self._params = models.SearchParams(hnsw_ef=hnsw_ef, quantization=rescoring)
        self._owns_client = owns_client
        self._secret = secret

    @classmethod
    def create(
        cls,
        client: QdrantClient,
        collection: str,
        dim: int,
        *,
        shards: int = 1,
        replicas: int = 1,
        quantization: Quantization = "none",
        where: str = "qdrant-client",
        hnsw_ef: int = 256,
        rescore: bool = True,
        owns_client: bool = True,
        secret: str | None = None,
        writes: WritePolicy | None = None,
    ) -> QdrantServerStore:
        """Create the collection; an existing one is never replaced here (see `drop`)."""
        store = cls(
            client,
            collection,
            where=where,
            hnsw_ef=hnsw_ef,
            rescore=rescore,
            owns_client=owns_client,
            secret=secret,
            writes=writes,
        )
        with store._errors("creating the collection"):
            if client.collection_exists(collection):
                raise IndexError_(
                    f"collection {collection!r} already exists on {store._where} but this index "
                    "directory has no manifest for it; re-index with --rebuild to replace it, or "
                    "set CTXR_QDRANT_COLLECTION to another name"
                )
            client.create_collection(
                collection,
                vectors_config={DENSE_VECTOR: _dense_params(dim, quantization)},
                sparse_vectors_config={
                    name: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    for name in (SPARSE_VECTOR, DOCUMENT_VECTOR)
                },
                shard_number=shards,
                replication_factor=replicas,
            )
            for field in KEYWORD_FIELDS:
                client.create_payload_index(
                    collection, field, models.PayloadSchemaType.KEYWORD, wait=True
                )
        return store

    @classmethod
    def open(
        cls,
        client: QdrantClient,
        collection: str,
        dim: int | None = None,
        *,
        where: str = "qdrant-client",
        hnsw_ef: int = 256,
        rescore: bool = True,
        owns_client: bool = True,
        secret: str | None = None,
        writes: WritePolicy | None = None,
    ) -> QdrantServerStore:
        """Open an existing collection, checking it has ctxr's schema (and `dim`, if given)."""
        store = cls(
            client,
            collection,
            where=where,
            hnsw_ef=hnsw_ef,
            rescore=rescore,
            owns_client=owns_client,
            secret=secret,
            writes=writes,
        )
        with store._errors("opening the collection"):
            if not client.collection_exists(collection):
                raise IndexNotFoundError(
                    f"collection {collection!r} does not exist on {store._where}; re-index with "
                    "--rebuild to recreate it, or fix CTXR_QDRANT_URL / CTXR_QDRANT_COLLECTION"
                )
            params = client.get_collection(collection).config.params
        store._check_schema(params, dim)
        return store

    @staticmethod
    def drop(client: QdrantClient, collection: str, where: str = "qdrant-client") -> None:
        """Delete the collection if it exists (the `--rebuild` path)."""
        with server_errors(where, "deleting the collection"):
            if client.collection_exists(collection):
                client.delete_collection(collection)

    def _check_schema(self, params: models.CollectionParams, dim: int | None) -> None:
        vectors = params.vectors if isinstance(params.vectors, dict) else {}
        sparse = params.sparse_vectors or {}
        dense = vectors.get(DENSE_VECTOR)
        bm25 = sparse.get(SPARSE_VECTOR)
        fix = "re-index with --rebuild, or set CTXR_QDRANT_COLLECTION to another name"
        if dense is None or bm25 is None or bm25.modifier != models.Modifier.IDF:
            raise IndexMismatchError(
                f"collection {self._collection!r} on {self._where} was not made by ctxr (it needs "
                f"a dense vector {DENSE_VECTOR!r} and a sparse vector {SPARSE_VECTOR!r} with the "
                f"IDF modifier); {fix}"
            )
        if dim is not None and dense.size != dim:
            raise IndexMismatchError(
                f"collection {self._collection!r} on {self._where} holds {dense.size}-dimensional "
                f"vectors but this index's embedder makes {dim}; {fix}"
            )

    def _errors(self, action: str) -> AbstractContextManager[None]:
        return server_errors(self._where, f"{action} {self._collection!r}", self._secret)

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        batches = [
            [
                models.PointStruct(id=p.point_id, vector=_vectors(p), payload=dict(p.payload))
                for p in points[start : start + UPSERT_BATCH]
            ]
            for start in range(0, len(points), UPSERT_BATCH)
        ]

        def send(batch: list[models.PointStruct]) -> None:
            self._client.upsert(self._collection, batch, wait=True)

        with self._errors("writing to"):
            write_batches(send, batches, self._writes)

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        match = models.FieldCondition(key="doc_id", match=models.MatchAny(any=list(doc_ids)))
        selector = models.FilterSelector(filter=models.Filter(must=[match]))
        with self._errors("deleting from"):
            self._client.delete(self._collection, selector, wait=True)

    def query_dense(
        self,
        vector: Sequence[float],
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]:
        return self._query([float(x) for x in vector], DENSE_VECTOR, limit, where, fields)

    def query_sparse(
        self,
        sparse: SparseTerms,
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]:
        return self._query_terms(sparse, SPARSE_VECTOR, limit, where, fields)

    def query_documents(
        self,
        sparse: SparseTerms,
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]:
        return self._query_terms(sparse, DOCUMENT_VECTOR, limit, where, fields)

    def _query_terms(
        self,
        sparse: SparseTerms,
        using: str,
        limit: int,
        where: PayloadFilter | None,
        fields: Sequence[str] | None,
    ) -> list[ScoredRecord]:
        if not sparse.indices:
            return []  # a query of only stop words matches nothing; Qdrant would reject it
        vector = models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        return self._query(vector, using, limit, where, fields)

    def _query(
        self,
        query: Any,
        using: str,
        limit: int,
        where: PayloadFilter | None,
        fields: Sequence[str] | None,
    ) -> list[ScoredRecord]:
        with self._errors("searching"):
            response = self._client.query_points(
                self._collection,
                query=query,
                using=using,
                query_filter=client_filter(where),
                limit=limit,
                with_payload=True if fields is None else list(fields),
                with_vectors=False,
                search_params=self._params,
            )
        return best_first(
            [ScoredRecord(str(p.id), float(p.score), _payload(p.payload)) for p in response.points]
        )

    def payloads(self, point_ids: Sequence[str]) -> dict[str, ChunkPayload]:
        if not point_ids:
            return {}
        with self._errors("reading from"):
            records = self._client.retrieve(
                self._collection, list(point_ids), with_payload=True, with_vectors=False
            )
        return {str(r.id): _payload(r.payload) for r in records}

    def count(self) -> int:
        with self._errors("counting"):
            return int(self._client.count(self._collection, exact=True).count)

    def document_points(self, doc_id: str) -> list[ScoredRecord]:
        match = models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))
        records: list[ScoredRecord] = []
        offset: Any = None
        with self._errors("reading a document from"):
            while True:
                page, offset = self._client.scroll(
                    self._collection,
                    scroll_filter=models.Filter(must=[match]),
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=True,
                    with_vectors=False,
                )
                records.extend(ScoredRecord(str(p.id), 0.0, _payload(p.payload)) for p in page)
                if offset is None:
                    break
        return sorted(records, key=lambda r: int(r.payload.get("index", 0)))

    def scan(self, limit: int | None = None) -> Iterator[list[ScannedPoint]]:
        offset: Any = None
        left = limit
        while left is None or left > 0:
            size = SCROLL_PAGE if left is None else min(SCROLL_PAGE, left)
            with self._errors("reading points from"):
                page, offset = self._client.scroll(
                    self._collection, limit=size, offset=offset, with_payload=True,
                    with_vectors=True,
                )  # fmt: skip
            yield [_scanned(p.id, p.vector, p.payload) for p in page]
            left = None if left is None else left - len(page)
            if offset is None or not page:
                break

    def payload_fields(self, keys: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
        offset: Any = None
        while True:
            with self._errors("reading points from"):
                page, offset = self._client.scroll(
                    self._collection, limit=SCROLL_PAGE, offset=offset,
                    with_payload=list(keys), with_vectors=False,
                )  # fmt: skip
            yield [dict(p.payload or {}) for p in page]
            if offset is None or not page:
                break

    def optimize(self) -> bool:
        return False  # a server optimises (builds HNSW) in the background by itself

    def flush(self) -> None:
        pass  # every write waited for the server's acknowledgement

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


def _dense_params(dim: int, quantization: Quantization) -> models.VectorParams:
    if quantization == "none":
        return models.VectorParams(size=dim, distance=models.Distance.COSINE)
    # The bytes kept in RAM, the float32 originals on disk until a rescore reads them.
    scalar = models.ScalarQuantizationConfig(
        type=models.ScalarType.INT8, quantile=QUANTILE, always_ram=True
    )
    return models.VectorParams(
        size=dim,
        distance=models.Distance.COSINE,
        on_disk=True,
        quantization_config=models.ScalarQuantization(scalar=scalar),
    )


def _vectors(point: StoredPoint) -> dict[str, Any]:
    vectors: dict[str, Any] = {
        DENSE_VECTOR: [float(x) for x in point.dense],
        SPARSE_VECTOR: models.SparseVector(
            indices=list(point.sparse.indices), values=list(point.sparse.values)
        ),
    }
    if point.document is not None and point.document.indices:
        # Only carriers hold it: a point without it does not count in its IDF's N.
        vectors[DOCUMENT_VECTOR] = models.SparseVector(
            indices=list(point.document.indices), values=list(point.document.values)
        )
    return vectors


def client_filter(spec: PayloadFilter | None) -> models.Filter | None:
    """The parsed filter as a qdrant-client `models.Filter` (None for no filter)."""
    if spec is None:
        return None

    def condition(c: Condition) -> models.Filter | models.FieldCondition:
        if isinstance(c, AllOf):
            return models.Filter(must=[condition(x) for x in c.conditions])
        if isinstance(c, AnyOf):
            return models.Filter(should=[condition(x) for x in c.conditions])
        if isinstance(c, Not):
            return models.Filter(must_not=[condition(c.condition)])
        if isinstance(c, Range):
            bounds = models.Range(gt=c.gt, gte=c.gte, lt=c.lt, lte=c.lte)
            return models.FieldCondition(key=c.key, range=bounds)
        if len(c.values) == 1:
            return models.FieldCondition(key=c.key, match=models.MatchValue(value=c.values[0]))
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=match_values(c)))

    return models.Filter(must=[condition(x) for x in spec.conditions])


def _scanned(point_id: Any, vectors: Any, payload: dict[str, Any] | None) -> ScannedPoint:
    vectors = vectors if isinstance(vectors, dict) else {}
    sparse = vectors.get(SPARSE_VECTOR)
    document = vectors.get(DOCUMENT_VECTOR)
    return ScannedPoint(
        str(point_id),
        list(vectors.get(DENSE_VECTOR) or []),
        SparseTerms(list(sparse.indices), list(sparse.values)) if sparse else SparseTerms([], []),
        _payload(payload),
        SparseTerms(list(document.indices), list(document.values)) if document else None,
    )


def _payload(stored: dict[str, Any] | None) -> ChunkPayload:
    # What the store gives back is what `chunk_payload` wrote; Qdrant keeps JSON, not types.
    return cast(ChunkPayload, dict(stored or {}))
