"""`EdgeStore`: Qdrant's own engine in-process (qdrant-edge-py), on disk under the index dir.

Dense vectors use cosine distance; the BM25 sparse vector carries our term weights and Qdrant's
IDF modifier supplies the IDF, computed over the live points at query time, so deletions and
additions keep IDF exact without re-weighting stored points.

The binding raises plain exceptions; a read or write that fails on a shard that opened is damage
on disk (a truncated vector file, a garbled payload page), so each call turns them into an
`IndexCorruptError` that names the index directory and the fix, never a traceback. The engine
may also panic (`pyo3_runtime.PanicException`, a `BaseException`): that is damage too. A write
the disk refused (full, read-only) is a `StorageError` instead: nothing is damaged.

Damage that would abort the process is looked for before the engine reads the files: the seal
(`ctxr.index.store.seal`) recorded at the last clean close is compared at open, and a shard
without one is loaded in a child process first (`ctxr.index.store.probe`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import qdrant_edge as qe

from ctxr.config import Quantization
from ctxr.disk import refusal, storage_error
from ctxr.errors import CtxrError, IndexError_, IndexInUseError
from ctxr.index.bm25.weights import SparseTerms
from ctxr.index.filters import AllOf, AnyOf, Condition, Not, PayloadFilter, Range, match_values
from ctxr.index.heap import return_freed_heap
from ctxr.index.integrity import corrupt
from ctxr.index.lock_holder import holder_phrase
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
from ctxr.index.store.merge_cap import set_merge_cap
from ctxr.index.store.probe import disk_low, probe_load
from ctxr.index.store.quantization import OVERSAMPLING, QUANTILE
from ctxr.index.store.read_ahead import read_ahead
from ctxr.index.store.seal import Summed, difference, read_seal, remove_seal, survey, write_seal

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SHARD_DIR = "qdrant"  # the shard's directory under the index directory
# The directory qdrant-edge locks while a shard is loaded (its write-ahead log).
WAL_DIR = "wal"


class EdgeStore:
    def __init__(
        self, shard: Any, hnsw_ef: int = 256, path: Path | None = None, rescore: bool = True
    ) -> None:
        self._shard = shard
        # Qdrant ignores the quantization parameters where the vectors are not quantized.
        rescoring = qe.QuantizationSearchParams(
            rescore=rescore, oversampling=OVERSAMPLING if rescore else None
        )
        self._params = qe.SearchParams(hnsw_ef=hnsw_ef, quantization=rescoring)
        self._path = path
        self._index_dir = path.parent if path is not None else Path("?")
        # Seal at close: set by a clean open and by every write; cleared for good once a call
        # on this shard failed (a damaged shard is never sealed as sound).
        self._reseal = path is not None
        self._failed = False
        # Same-size changes to bulk data since the seal (see `seal.Difference`): the shard
        # loaded, and the point checks are told, until a write makes this session's state
        # the one to seal.
        self.seal_problem: str | None = None
        # The shard's files as the open found them (`seal.survey`): at close, a file whose
        # stamp is unchanged keeps its checksum, unread.
        self._opened: dict[str, Summed] | None = None

    @contextmanager
    def _guarded(self, action: str) -> Iterator[None]:
        try:
            yield
        except CtxrError:
            raise
        except BaseException as exc:
            if not is_engine_failure(exc):
                raise  # KeyboardInterrupt, SystemExit, GeneratorExit: never swallowed
            self._failed = True
            raise engine_error(self._index_dir, action, exc) from exc

    def _written(self) -> None:
        """A write: this session's state is the one to seal at close."""
        if self.seal_problem is not None and self._path is not None:
            remove_seal(self._path)  # kept until now to keep telling; the write changes files
        if not self._failed:
            self._reseal = True
            self.seal_problem = None

    @classmethod
    def create(
        cls,
        path: Path,
        dim: int,
        hnsw_ef: int = 256,
        quantization: Quantization = "none",
        segment_points: int = 0,
        rescore: bool = True,
    ) -> EdgeStore:
        """A new shard; with `segment_points`, one whose optimizer leaves segments of that size
        apart (`segment_optimizers`): the writer closes a segment every `segment_points`
        points (`ctxr.pipeline.write`)."""
        optimizers = segment_optimizers(segment_points, dim) if segment_points else None
        config = qe.EdgeConfig(
            vectors={DENSE_VECTOR: _dense_params(dim, quantization)},
            sparse_vectors={name: _sparse_params() for name in (SPARSE_VECTOR, DOCUMENT_VECTOR)},
            optimizers=optimizers,
        )
        try:
            path.mkdir(parents=True, exist_ok=True)
            remove_seal(path)  # a seal left in the directory speaks of another shard
            shard = qe.EdgeShard.create(str(path), config)
        except BaseException as exc:  # the binding raises plain exceptions with Qdrant's message
            if not is_engine_failure(exc) and not isinstance(exc, OSError):
                raise
            kind = refusal(exc)
            if kind is not None:
                raise storage_error(path.parent, "index", kind, detail=_first_line(exc)) from exc
            raise IndexError_(
                f"cannot create the Qdrant shard at {path}: {_first_line(exc)}; "
                "remove the directory or choose another --index"
            ) from exc
        store = cls(shard, hnsw_ef, path, rescore)
        with store._guarded("creating the payload indexes"):
            for field in KEYWORD_FIELDS:
                shard.update(
                    qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword)
                )
        return store

    @classmethod
    def open(
        cls,
        path: Path,
        hnsw_ef: int = 256,
        every_byte: bool = False,
        rescore: bool = True,
        writer: WriterSize | None = None,
    ) -> EdgeStore:
        """Load the shard at `path` once its files are known to be safe to load (module doc).

        `every_byte` compares every file with the seal, stamps or not (`ctxr doctor`: the one
        check that sees a disk change bytes by itself). A `writer` (an indexing run) says how
        large the index is, and the segments Qdrant may still merge are sized from it first
        (`ctxr.index.store.merge_cap`)."""
        problem, opened = _check_before_load(path, every_byte, writer)
        if not every_byte:  # every byte was just read, and is cached
            read_ahead(path)  # the engine would read the int8 bytes a page at a time (its doc)
        try:
            shard = qe.EdgeShard.load(str(path))
        except BaseException as exc:
            if not is_engine_failure(exc):
                raise
            if "WouldBlock" in str(exc):
                raise in_use(path) from exc
            kind = refusal(exc)
            if kind is not None:  # the load replays the log and rewrites files: it writes
                raise storage_error(path.parent, "index", kind, detail=_first_line(exc)) from exc
            panicked = "" if isinstance(exc, Exception) else "the engine panicked: "
            what = f"its Qdrant shard cannot be opened: {panicked}{_first_line(exc)}"
            raise corrupt(path.parent, what) from exc
        store = cls(shard, hnsw_ef, path, rescore)
        store._opened = opened
        if problem is not None:  # loaded to be read, never sealed as it is
            store.seal_problem = problem
            store._reseal = False
        return store

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
        self._written()
        with self._guarded("writing points"):
            self._shard.update(qe.UpdateOperation.upsert_points(edge_points))

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        match = qe.FieldCondition("doc_id", match=qe.MatchAny(list(doc_ids)))
        self._written()
        with self._guarded("deleting points"):
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(qe.Filter(must=[match])))

    def query_dense(
        self,
        vector: Sequence[float],
        limit: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredRecord]:
        query = qe.Query.Nearest([float(x) for x in vector], using=DENSE_VECTOR)
        return self._query(query, limit, where, fields)

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
        vector = qe.SparseVector(sparse.indices, sparse.values)
        return self._query(qe.Query.Nearest(vector, using=using), limit, where, fields)

    def _query(
        self, query: Any, limit: int, where: PayloadFilter | None, fields: Sequence[str] | None
    ) -> list[ScoredRecord]:
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            filter=edge_filter(where),
            with_payload=True if fields is None else qe.PayloadSelector.Include(list(fields)),
            with_vector=False,
            params=self._params,
        )
        with self._guarded("a search"):
            return best_first(
                [
                    ScoredRecord(str(p.id), float(p.score), _payload(p.payload))
                    for p in self._shard.query(request)
                ]
            )

    def payloads(self, point_ids: Sequence[str]) -> dict[str, ChunkPayload]:
        if not point_ids:
            return {}
        with self._guarded("reading points"):
            records = self._shard.retrieve(list(point_ids), with_payload=True, with_vector=False)
        return {str(r.id): _payload(r.payload) for r in records}

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

    def payload_fields(self, keys: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
        offset: Any = None
        selector = qe.PayloadSelector.Include(list(keys))
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, with_payload=selector, with_vector=False
            )
            with self._guarded("reading points"):
                page, offset = self._shard.scroll(request)
            yield [dict(p.payload or {}) for p in page]
            if offset is None or not page:
                break

    def optimize(self) -> bool:
        self._written()
        with self._guarded("building the HNSW index"):
            built = bool(self._shard.optimize())
        # A closed segment's BM25 postings move from the heap to its files (`_sparse_params`);
        # the heap they leave stays resident until trimmed.
        return_freed_heap()
        return built

    def flush(self) -> None:
        self._written()  # `ctxr doctor --repair` flushes to accept what it has checked
        with self._guarded("flushing"):
            self._shard.flush()

    def close(self) -> None:
        """Flush, seal, then let the shard go: the seal is written while this process still
        holds the shard, so no other opener can see files newer than it."""
        path = self._path
        try:
            if self._reseal and not self._failed and path is not None:
                self._seal(path)
        finally:
            self._shard.close()

    def _seal(self, path: Path) -> None:
        try:
            with self._guarded("flushing"):
                self._shard.flush()
            write_seal(path, self._opened)
        except (CtxrError, OSError):
            # A full disk, or a flush that failed: no seal (the next open probes the shard in
            # a child process), never a stale one. What went wrong was said where it happened.
            remove_seal(path)


def _check_before_load(
    path: Path, every_byte: bool, writer: WriterSize | None = None
) -> tuple[str | None, dict[str, Summed] | None]:
    """Compare the shard with its seal (under its lock), or probe an unsealed one in a child;
    for a `writer`, write the merge limit its size calls for under the same lock.

    Raises `IndexCorruptError` for damage the engine must not load; returns the description of
    changed bulk data it may load (the point checks then find what it did), else None, and the
    files as found (`seal.survey`) when a seal was compared. Files whose stamps match the
    seal's are not read unless `every_byte`. On a nearly full disk a sealed shard is probed
    too: the load writes (it folds each journal into its tracker through a mapped page), and a
    write the disk cannot back is a SIGBUS, which the child takes instead of this process
    (`StorageError`: the disk is full)."""
    problem: str | None = None
    found: dict[str, Summed] | None = None
    with _shard_lock(path) as locked:
        if not locked:
            raise in_use(path)
        recorded = read_seal(path)
        if recorded is not None:
            found = survey(path, None if every_byte else recorded)
            changed = difference(recorded, found)
            if changed is None:
                remove_seal(path)  # the load changes files; the next clean close seals again
            elif changed.fragile:
                raise corrupt(path.parent, changed.describe())
            else:
                problem = changed.describe()  # the seal stays: a crash now leaves it telling
        if writer is not None:  # read at load, and left out of the seal (`merge_cap`)
            set_merge_cap(path, writer.points, writer.segment_points)
    if (recorded is None or disk_low(path)) and path.is_dir() and (path / WAL_DIR).is_dir():
        died = probe_load(path)
        if died is not None:
            raise corrupt(path.parent, died)
    return problem, found


@contextmanager
def _shard_lock(path: Path) -> Iterator[bool]:
    """Hold qdrant-edge's own lock on the shard (its `wal` directory) while its files are
    compared, so no owner writes them meanwhile; False when another process holds it."""
    if fcntl is None:  # pragma: no cover - Windows
        yield True
        return
    try:
        fd = os.open(path / WAL_DIR, os.O_RDONLY)
    except OSError:
        yield True  # no log directory: nothing holds it; the load says what is wrong
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # drops the lock


def in_use(path: Path) -> IndexInUseError:
    # Qdrant's write-ahead log is locked: the shard is healthy but open elsewhere
    # (`factory.open_store` names the server that owns it, if one does).
    holder = holder_phrase(path / WAL_DIR)
    if holder.startswith("this process"):  # never blame another process for the caller's own
        return IndexInUseError(
            f"the index at {path.parent} is already open in {holder}, by a search service "
            "or a build that is not closed; close it first (a search service, a retriever: "
            "`close()`), or search through `ctxr.Client`, whose services share one open index"
        )
    return IndexInUseError(
        f"the index at {path.parent} is in use by {holder} (a running "
        "`ctxr index`, `ctxr watch` update, `ctxr mcp` or a Python program); wait "
        "for it to finish or stop it, then retry"
    )


def is_engine_failure(exc: BaseException) -> bool:
    """An exception the engine raised: any `Exception`, or a Rust panic (pyo3's
    `PanicException` derives from `BaseException`), never an interrupt or an exit."""
    if isinstance(exc, Exception):
        return True
    return type(exc).__name__ == "PanicException"


def engine_error(index_dir: Path, action: str, exc: BaseException) -> CtxrError:
    """A failed engine call: the disk refusing a write, or damage."""
    kind = refusal(exc)
    if kind is not None:
        return storage_error(index_dir, "index", kind, detail=f"{action}: {_first_line(exc)}")
    panicked = "the engine panicked: " if not isinstance(exc, Exception) else ""
    return corrupt(index_dir, f"{action} failed: {panicked}{_first_line(exc)}")


@dataclass(frozen=True)
class WriterSize:
    """What an indexing run that opens a shard knows of its size: the points the index holds
    (its manifest's chunks) and `CTXR_SEGMENT_POINTS`."""

    points: int
    segment_points: int


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    return lines[0][:300]


# qdrant-edge indexes a segment on `optimize()` from about this many KB of vectors (measured:
# 4,000 384-d points, 6,000 KB, stay plain; 8,000, 12,000 KB, are indexed; Qdrant's default).
ENGINE_INDEXING_THRESHOLD_KB = 10_000


def segment_optimizers(segment_points: int, dim: int) -> Any:
    """The optimizer settings of a shard whose segments are closed every `segment_points`.

    Qdrant merges segments smaller than `max_segment_size` (KB of float32 vectors) into one
    and rebuilds its HNSW graph. A quarter of a segment keeps closed segments out of that, and
    the last, partial one once it is past a quarter, so an incremental run's new points make
    a small segment of their own (measured: 12,000 new points against two closed segments of
    20,000 took 7.9 s and merged with neither; with Qdrant's default limit, a single segment
    of 195,000 points was merged with them and rebuilt whole, 60 s). Small segments still
    merge with each other, up to that quarter. A closed segment must also be one the
    optimizer indexes: below the engine's own threshold it would stay the segment written to.
    """
    segment_kb = segment_points * dim * 4 // 1024
    threshold = segment_kb // 2 if segment_kb // 2 < ENGINE_INDEXING_THRESHOLD_KB else None
    return qe.EdgeOptimizersConfig(
        max_segment_size=max(1, segment_kb // 4), indexing_threshold=threshold
    )


def _sparse_params() -> Any:
    """A BM25 vector's settings: IDF weighting, and a closed segment's postings in its files,
    read through the page cache (`Memory.Cached`) instead of held on the heap.

    The segment being written keeps its postings on the heap whatever this says (about 1.4 kB
    a point at ~66 terms). Measured on the engine alone, 200,000 points in segments of 20,000:
    1.2 kB of anonymous memory a point kept with the postings on the heap, 240 B with them in
    the files, whose pages are the kernel's to drop, and the same BM25 query time
    (docs/explanation/benchmarks.md, "Closed segments' BM25 postings in their files").
    """
    return qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=qe.Memory.Cached)


def _dense_params(dim: int, quantization: Quantization) -> Any:
    if quantization == "none":
        return qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)
    # The bytes cached in memory, the float32 originals left on disk until a rescore reads them.
    scalar = qe.ScalarQuantizationConfig(qe.ScalarType.Int8, QUANTILE, memory=qe.Memory.Cached)
    return qe.EdgeVectorParams(
        size=dim, distance=qe.Distance.Cosine, quantization_config=scalar, memory=qe.Memory.Cold
    )


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
        if isinstance(c, Not):
            return qe.Filter(must_not=[condition(c.condition)])
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
