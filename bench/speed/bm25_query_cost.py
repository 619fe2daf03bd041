"""Where the BM25 query over chunks spends its time: the postings, and the payloads it reads.

The BM25 query over chunks is the largest part of a search at a million chunks (4.0 of
11.5 ms, `bench.speed.search_stages`). Two settings of Qdrant's could make it cheaper, and
this benchmark measures both on an index kept by ``python -m bench.speed.scale --keep DIR``,
with the scale benchmark's queries (2-6 words of the corpus's own law), interleaved query by
query so that load drifts alike on every row:

1. **The postings' number type and memory.** Qdrant can keep a sparse index's weights as
   float16 or uint8 (`EdgeSparseVectorParams(datatype=...)`) instead of float32, and a closed
   segment's postings on the heap or in its files through the page cache (`memory=`; ctxr
   uses `Memory.Cached`, `edge._sparse_params`). The index's chunk BM25 vectors are written
   into one sparse-only shard per row (IDF modifier, as ctxr's) and each is optimised, as a
   built index is. Printed per row: p50 / p95 / mean of the query alone (no payload) against
   ctxr's, how many of ctxr's top 10 and top 50 it finds, and the shard's size on disk.
2. **The payloads' memory.** Each candidate's ranking fields are read from the payload
   storage. A copy of the index's shard is loaded as ctxr loads it, and with its payload
   storage `Memory.Cached` and `Memory.Pinned` (`EdgeConfig(payload_memory=...)`). Printed per
   mode: the query with no payload, with the ranking fields (`RANKING_FIELDS`, what a search
   reads) and with the whole payload.

Usage::

    python -m bench.speed.scale --chunks 200000 --keep /tmp/scale200k   # once
    python -m bench.speed.bm25_query_cost --keep /tmp/scale200k [--queries 200]
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from bench.common import markdown_corpus
from bench.common.measure import Timing, load_line, machine, parser, say
from bench.common.synthetic import make_queries
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.weights import SparseTerms, query_vector
from ctxr.index.store.base import DENSE_VECTOR, DOCUMENT_VECTOR, RANKING_FIELDS, SPARSE_VECTOR
from ctxr.index.store.edge import EdgeStore, _dense_params, _sparse_params

# Row name: (weight type, postings memory; None: the engine's default, on the heap).
POSTINGS: dict[str, tuple[str, str | None]] = {
    "float32, Cached (ctxr)": ("Float32", "Cached"),
    "float32, heap": ("Float32", None),
    "float16, Cached": ("Float16", "Cached"),
    "uint8, Cached": ("Uint8", "Cached"),
}
BASE = next(iter(POSTINGS))
PAYLOAD_MEMORY = ("as ctxr loads it", "Cached", "Pinned")
LIMIT = 50  # the candidates a retriever fetches (CTXR_CANDIDATES)
PAGE = 2_000


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    work = Path(args.keep)
    state = json.loads((work / "state.json").read_text())
    say(f"BM25 query cost: index {work / 'index'}; {machine()}")
    say(load_line("at start"))
    corpus = markdown_corpus.corpus(work / "corpus", state["chunks"], state["seed"])
    analyzer = Bm25Analyzer()
    vectors = [query_vector(analyzer.terms(q)) for q in
               make_queries(corpus.words, args.queries, state["seed"])]  # fmt: skip
    vectors = [v for v in vectors if v.indices]
    scratch = Path(tempfile.mkdtemp(prefix="ctxr-bm25-cost-"))
    try:
        _postings(work, scratch, vectors)
        _payloads(work, scratch, vectors)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    say(load_line("at end"))
    return 0


def _postings(work: Path, scratch: Path, vectors: Sequence[SparseTerms]) -> None:
    paths = {name: scratch / f"postings-{i}" for i, name in enumerate(POSTINGS)}
    shards = {name: _shard(paths[name], *row) for name, row in POSTINGS.items()}
    source = EdgeStore.open(work / "index" / "qdrant")
    started = time.perf_counter()
    points = 0
    try:
        for page in source.scan():
            for shard in shards.values():
                shard.update(qe.UpdateOperation.upsert_points([_point(p) for p in page]))
            points += len(page)
    finally:
        source.close()
    say(f"{points:,} BM25 vectors copied into {len(POSTINGS)} shards in "
        f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    for name, shard in shards.items():
        started = time.perf_counter()
        shard.optimize()
        say(f"{name}: optimised in {time.perf_counter() - started:.1f} s")
    found, seconds = _timed({name: (shard, False) for name, shard in shards.items()}, vectors)
    base = Timing.of(seconds[BASE])
    say(f"{len(vectors)} queries, limit {LIMIT}, no payload")
    say("")
    say("| postings | p50 ms | p95 ms | mean ms | p50 / ctxr's | top 10 kept | top 50 kept |")
    say("|---|---:|---:|---:|---:|---:|---:|")
    for name, spans in seconds.items():
        t = Timing.of(spans)
        at10 = _kept(found[BASE], found[name], 10)
        at50 = _kept(found[BASE], found[name], LIMIT)
        say(f"| {name} | {t.p50:.2f} | {t.p95:.2f} | {t.mean:.2f} | {t.p50 / base.p50:.2f}x "
            f"| {at10:.4f} | {at50:.4f} |")  # fmt: skip
    say("")
    for name, shard in shards.items():
        shard.close()
        size = sum(f.stat().st_size for f in paths[name].rglob("*") if f.is_file())
        say(f"{name}: shard on disk {size / 2**20:,.0f} MiB")
    say("")


def _payloads(work: Path, scratch: Path, vectors: Sequence[SparseTerms]) -> None:
    copy = scratch / "payloads"
    shutil.copytree(work / "index" / "qdrant", copy)
    dim = int(json.loads((work / "index" / "manifest.json").read_text())["settings"]["dim"])
    fields = qe.PayloadSelector.Include(list(RANKING_FIELDS))
    say("| payload storage | no payload p50 ms | ranking fields p50 ms | whole p50 ms |")
    say("|---|---:|---:|---:|")
    for mode in PAYLOAD_MEMORY:
        shard = qe.EdgeShard.load(str(copy), _loaded_as(copy, dim, mode))
        try:
            rows = {"none": (shard, False), "fields": (shard, fields), "whole": (shard, True)}
            _, seconds = _timed(rows, vectors)
        finally:
            shard.close()
        p50 = {name: Timing.of(spans).p50 for name, spans in seconds.items()}
        say(f"| {mode} | {p50['none']:.2f} | {p50['fields']:.2f} | {p50['whole']:.2f} |")
    say("")


def _loaded_as(shard: Path, dim: int, mode: str) -> Any:
    """The shard's own configuration (`mode` "as ctxr loads it"), or it with `payload_memory`."""
    if mode == PAYLOAD_MEMORY[0]:
        return None
    saved = json.loads((shard / "edge_config.json").read_text())
    quantized = "quantization_config" in saved["vectors"][DENSE_VECTOR]
    sparse = _sparse_params()
    return qe.EdgeConfig(
        vectors={DENSE_VECTOR: _dense_params(dim, "int8" if quantized else "none")},
        sparse_vectors={SPARSE_VECTOR: sparse, DOCUMENT_VECTOR: sparse},
        on_disk_payload=True,
        payload_memory=getattr(qe.Memory, mode),
    )


def _shard(path: Path, datatype: str, memory: str | None) -> Any:
    params = qe.EdgeSparseVectorParams(
        modifier=qe.Modifier.Idf,
        datatype=getattr(qe.VectorStorageDatatype, datatype),
        memory=getattr(qe.Memory, memory) if memory else None,
    )
    path.mkdir(parents=True)
    return qe.EdgeShard.create(str(path), qe.EdgeConfig(sparse_vectors={SPARSE_VECTOR: params}))


def _point(scanned: Any) -> Any:
    sparse = qe.SparseVector(list(scanned.sparse.indices), list(scanned.sparse.values))
    return qe.Point(scanned.point_id, {SPARSE_VECTOR: sparse}, {})


def _timed(
    rows: dict[str, tuple[Any, Any]], vectors: Sequence[SparseTerms]
) -> tuple[dict[str, list[list[str]]], dict[str, list[float]]]:
    """Each row's (shard, payload selector) asked every query once to warm it, then timed
    query by query, rows interleaved; returns the ids each found and the seconds it took."""

    def ask(shard: Any, payload: Any, vector: SparseTerms) -> list[str]:
        sparse = qe.SparseVector(list(vector.indices), list(vector.values))
        query = qe.Query.Nearest(sparse, using=SPARSE_VECTOR)
        request = qe.QueryRequest(limit=LIMIT, query=query, with_payload=payload, with_vector=False)
        return [str(p.id) for p in shard.query(request)]

    found = {name: [ask(*row, v) for v in vectors] for name, row in rows.items()}
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    for vector in vectors:
        for name, row in rows.items():
            started = time.perf_counter()
            ask(*row, vector)
            seconds[name].append(time.perf_counter() - started)
    return found, seconds


def _kept(reference: list[list[str]], other: list[list[str]], k: int) -> float:
    """Mean share of the reference's top k that `other`'s top k holds."""
    shares = [len(set(r[:k]) & set(o[:k])) / max(len(r[:k]), 1) for r, o in
              zip(reference, other, strict=True)]  # fmt: skip
    return sum(shares) / len(shares)


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--keep", required=True, help="a kept scale run (its index and corpus)")
    p.add_argument("--queries", type=int, default=200)
    return p


if __name__ == "__main__":
    raise SystemExit(main())
