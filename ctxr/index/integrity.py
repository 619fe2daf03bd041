"""Is the store what the manifest says it is? Cheap checks that catch a damaged Qdrant shard.

A shard damaged on disk fails in one of two ways. Loudly: a truncated vector file or a garbled
payload page makes Qdrant raise on the first read that touches it. Quietly: overwritten vector
bytes or a damaged id tracker read back as plausible points with absurd scores (2.9e37 for a
cosine similarity, negative BM25), and nothing raises. Both are caught here:

- `verify` reads points back, vectors included, and compares them with the manifest: the point
  count, that every dense vector is finite and unit length (Qdrant stores cosine vectors
  normalised), that BM25 weights are finite and positive, and that each payload names a document
  the manifest holds. At open it reads a sample (`OPEN_SAMPLE` points); at the end of `ctxr index`
  and in `ctxr doctor` it reads every point.
- Bytes of the shard's bulk data that changed since ctxr last closed it (its seal) are damage
  too, named with the files, even where the points read show nothing.
- `check_scores` runs on every ranking a search gets back: cosine similarity lies in [-1, 1]
  and BM25 with IDF is never negative, so a score outside that range is damage, not a result.

Every problem becomes an `IndexCorruptError` naming the index directory and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ctxr.errors import IndexCorruptError, StorageError
from ctxr.index.manifest import Manifest
from ctxr.index.store.base import ScannedPoint, ScoredRecord, Store

OPEN_SAMPLE = 1024  # points read back when an index is opened: a few ms
NORM_TOLERANCE = 0.02  # |v|^2 of a stored cosine vector, 1 up to float32 rounding
BM25_SCORE_TOLERANCE = 1e-3  # BM25 with IDF is never negative; rounding aside
# A cosine from int8 bytes that were not rescored (`CTXR_RESCORE=false`) is off the float32 one
# by up to 0.01 (measured on ArguAna's 13,783 chunk vectors: 20,094 scores, largest errors
# -0.0098 and +0.0055, a vector's own score up to 1.0051), so a dense score may pass 1 by that
# much; damage gives scores far outside, or not finite.
DENSE_SCORE_TOLERANCE = 0.05
PAYLOAD_KEYS = ("doc_id", "source", "text", "start", "end")
EXAMPLES_KEPT = 5  # problems of one kind named in a message; the rest are counted


def corrupt(index_dir: Path, what: str) -> IndexCorruptError:
    return IndexCorruptError(
        f"the index at {index_dir} is damaged ({what}); run `ctxr doctor --index {index_dir} "
        f"--repair` to keep what is sound, or re-index with `ctxr index PATH --index {index_dir} "
        "--rebuild` (contexts and embeddings come from the caches, nothing is paid again)",
        what,
    )


@dataclass(slots=True)
class Findings:
    """What a scan found: points read, and the documents whose points are damaged or missing."""

    points_read: int = 0
    points_stored: int = 0
    problems: list[str] = field(default_factory=list)
    damaged_docs: set[str] = field(default_factory=set)
    # Points of documents the manifest does not hold: what a run killed between writing a
    # batch and saving the manifest leaves behind. Not damage; the next run clears them.
    orphan_docs: set[str] = field(default_factory=set)
    orphan_ids: list[str] = field(default_factory=list)
    unreadable: str | None = None  # the store raised while being read: nothing can be kept
    complete: bool = False  # every point was read

    @property
    def sound(self) -> bool:
        return not self.problems and self.unreadable is None

    def summary(self) -> str:
        if self.unreadable is not None:
            return self.unreadable
        return "; ".join(self.problems)


def verify(store: Store, manifest: Manifest, limit: int | None = None) -> Findings:
    """Read up to `limit` points (all when None) and compare them with the manifest."""
    found = Findings()
    try:
        found.points_stored = store.count()
        seen: dict[str, int] = {}
        probe: ScannedPoint | None = None
        for page in store.scan(limit):
            norms = _squared_norms(page)
            for point, norm in zip(page, norms, strict=True):
                found.points_read += 1
                if _check_point(point, float(norm), manifest, found, seen) and probe is None:
                    probe = point
        if probe is not None:
            _probe(store, probe, found)
    except StorageError:
        raise  # the disk refused a write (full, read-only): not damage, never repaired as such
    except Exception as exc:  # the shard raised on a read: it is damaged where it was read
        found.unreadable = getattr(exc, "what", "") or f"reading failed: {_first_line(exc)}"
        return found
    found.complete = limit is None or found.points_read < limit
    # Bulk data that changed since the shard's seal (`ctxr.index.store.seal`): damage even
    # where no point read here shows it; a store without a seal has no such attribute.
    changed = getattr(store, "seal_problem", None)
    if isinstance(changed, str):
        found.problems.append(changed)
    expected = manifest.chunk_count
    if found.points_stored < expected:  # more is a killed run's leftovers (orphans)
        found.problems.append(f"the store holds {found.points_stored} points, the manifest "
                              f"records {expected}")  # fmt: skip
    if found.complete:
        short = [d for d, e in manifest.documents.items() if seen.get(d, 0) != e.chunks]
        found.damaged_docs.update(short)
        if short:
            found.problems.append(_counted(short, "documents with points missing or extra"))
        if found.points_stored != found.points_read:
            found.problems.append(f"the store counts {found.points_stored} points but "
                                  f"{found.points_read} can be read")  # fmt: skip
    return found


def _probe(store: Store, point: ScannedPoint, found: Findings) -> None:
    """Search for a sound point with its own vectors: it must come back, with sane scores.

    This is what a damaged id tracker fails: every point reads back well, but the searches
    map onto the wrong points (negative BM25, a point that does not find itself)."""
    dense = store.query_dense(list(point.dense), 3)
    sparse = store.query_sparse(point.sparse, 3)
    for retriever, ranking in (("dense", dense), ("bm25", sparse)):
        problem = score_problem(retriever, ranking)
        if problem:
            found.problems.append(problem)
            return
    if not dense or dense[0].score < 1.0 - NORM_TOLERANCE:
        found.problems.append(f"a dense search for point {point.point_id}'s own vector does "
                              "not find it")  # fmt: skip


def _squared_norms(page: list[ScannedPoint]) -> list[float]:
    """|v|^2 of each point's dense vector, a page at a time (100k x 384 floats in Python
    would cost seconds); inf for a vector that is missing or of the wrong length."""
    if not page:
        return []
    dim = len(page[0].dense)
    if dim and all(len(p.dense) == dim for p in page):
        vectors = np.asarray([p.dense for p in page], dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            return [float(x) for x in np.einsum("ij,ij->i", vectors, vectors)]
    return [math.fsum(x * x for x in p.dense) if p.dense else math.inf for p in page]


def _check_point(
    point: ScannedPoint, norm: float, manifest: Manifest, found: Findings, seen: dict[str, int]
) -> bool:
    """Record what is wrong with one point; whether it is sound."""
    payload = point.payload
    doc_id = payload.get("doc_id")
    missing = [k for k in PAYLOAD_KEYS if k not in payload]
    if missing or not isinstance(doc_id, str):
        found.problems.append(f"point {point.point_id} has no {', '.join(missing) or 'doc_id'}")
        return False
    if doc_id not in manifest.documents:
        found.orphan_docs.add(doc_id)
        found.orphan_ids.append(point.point_id)
        return False
    seen[doc_id] = seen.get(doc_id, 0) + 1
    if not math.isfinite(norm) or abs(norm - 1.0) > NORM_TOLERANCE:
        _damaged(found, doc_id, f"point {point.point_id} of {doc_id} has a dense vector of "
                 f"squared length {norm:.3g}, not 1")  # fmt: skip
        return False
    document = point.document.values if point.document is not None else []
    if not all(math.isfinite(v) and v > 0 for v in [*point.sparse.values, *document]):
        _damaged(found, doc_id, f"point {point.point_id} of {doc_id} has a BM25 weight that "
                 "is not a positive number")  # fmt: skip
        return False
    return True


def _damaged(found: Findings, doc_id: str, problem: str) -> None:
    found.damaged_docs.add(doc_id)
    if len(found.damaged_docs) <= EXAMPLES_KEPT:
        found.problems.append(problem)
    elif len(found.damaged_docs) == EXAMPLES_KEPT + 1:
        found.problems.append("more damaged points (see `ctxr doctor`)")


def check(store: Store, manifest: Manifest, index_dir: Path, limit: int | None) -> None:
    """Raise `IndexCorruptError` unless the points read back agree with the manifest."""
    found = verify(store, manifest, limit)
    if not found.sound:
        raise corrupt(index_dir, found.summary())


def check_scores(retriever: str, records: Iterable[ScoredRecord], index_dir: Path) -> None:
    """Raise `IndexCorruptError` for a score no sound index can give."""
    problem = score_problem(retriever, records)
    if problem:
        raise corrupt(index_dir, problem)


def score_problem(retriever: str, records: Iterable[ScoredRecord]) -> str | None:
    """A non-finite score, a cosine similarity outside [-1, 1] by more than int8's rounding
    (`DENSE_SCORE_TOLERANCE`) or a negative BM25 score."""
    if retriever == "dense":
        low, high = -1.0 - DENSE_SCORE_TOLERANCE, 1.0 + DENSE_SCORE_TOLERANCE
    else:
        low, high = -BM25_SCORE_TOLERANCE, math.inf
    for r in records:
        if not (math.isfinite(r.score) and low <= r.score <= high):
            return f"a {retriever} search scored a chunk {r.score:.3g}, which no sound index gives"
    return None


def _counted(items: list[str], what: str) -> str:
    shown = ", ".join(items[:EXAMPLES_KEPT])
    more = f" and {len(items) - EXAMPLES_KEPT} more" if len(items) > EXAMPLES_KEPT else ""
    return f"{len(items)} {what} ({shown}{more})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
