"""HNSW recall against exact search on real embeddings, per `hnsw_ef`.

What is real: the vectors. Chunk vectors are read back (``EdgeShard.scroll``, with vectors:
`bench.common.stored_vectors`) from a SciFact index built by the evaluation harness (``ctxr
eval``: SciFact's 5,183 abstracts split by ctxr at 200 tokens, no context, embedded with the
local MiniLM); query vectors are SciFact's 300 test claims embedded with the same MiniLM
through the embedding cache. When no such index exists, one is built the same way
(``index_documents`` into a temp dir; fast when the embedding cache is warm, about 45 chunks/s
when it is not).

The recall shard is created by ``EdgeStore.create`` (ctxr's own config: dense + BM25 sparse,
default HNSW m=16, ef_construct=100 and optimizer thresholds) and filled through
``EdgeStore.upsert``; ``EdgeStore.optimize()`` builds the HNSW graph. For each query the truth
is ``SearchParams(exact=True)`` (checked against numpy's brute-force cosine); each ``ef`` is
timed through ``EdgeStore.query_dense`` (payload included, as a search does).

``--synthetic N`` adds noisy copies of the real vectors (real vector + Gaussian noise, cosine
about 0.9) up to N points: that part is SYNTHETIC, and tight clusters of near-duplicates are a
harder (less realistic) geometry for HNSW than real embeddings.

Usage::

    python -m bench.quality.hnsw_recall [--index DIR] [--data DIR] [--ef 16 32 64 128 256 512]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from bench.common.checkout import data_dir
from bench.common.measure import Span, load_line, machine, say, time_each
from bench.common.measure import parser as cli
from bench.common.stored_vectors import DEFAULT_INDEX, Matrix, StoredVectors, read_vectors
from ctxr.config import load_settings
from ctxr.eval.datasets import load_beir
from ctxr.eval.runner import eval_cache_dir, to_documents
from ctxr.index import components
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.store.base import DENSE_VECTOR, StoredPoint
from ctxr.index.store.edge import EdgeStore
from ctxr.pipeline.build import index_documents

EFS = (16, 32, 64, 128, 256, 512)
K = 10
TARGET = 0.99
NOISE = 0.5


def build_eval_index(data: Path, index_dir: Path) -> None:
    """The SciFact index as `ctxr eval` builds it (ctxr chunks, no context, cached embeddings)."""
    cache_dir = eval_cache_dir(load_settings())
    settings = load_settings(index_dir=index_dir, context="none", cache_dir=cache_dir)
    documents = to_documents(load_beir(data), "beir")
    say(f"building a SciFact index at {index_dir} ({len(documents):,} documents)...")
    index_documents(documents, settings, chunker_name="eval-ours")


def scifact_vectors(index_dir: Path, data: Path, tmp: Path) -> StoredVectors:
    """The chunk vectors of the SciFact eval index at `index_dir`, or of one built under `tmp`
    when there is none."""
    if not (index_dir / "manifest.json").exists():
        index_dir = tmp / "scifact"
        build_eval_index(data, index_dir)
    with Span() as span:
        corpus = read_vectors(index_dir)
    say(f"read {len(corpus.ids):,} chunk vectors from {index_dir} in {span.seconds:.1f} s")
    return corpus


def embed_queries(data: Path) -> tuple[list[str], Matrix]:
    settings = load_settings(cache_dir=eval_cache_dir(load_settings()))
    texts = [q.text for q in load_beir(data).queries]
    embedder = components.make_embedder(settings, cached=True)  # where `ctxr eval` caches
    assert isinstance(embedder, CachedEmbedder)
    try:
        vectors = embedder.embed(texts)
    finally:
        embedder.close()
    say(f"embedded {len(texts)} SciFact claims ({embedder.hits} from the embedding cache)")
    return texts, vectors


def add_synthetic(corpus: StoredVectors, total: int, seed: int) -> StoredVectors:
    """Noisy copies of the real vectors up to `total` points: SYNTHETIC, see the docstring."""
    extra = total - len(corpus.ids)
    if extra <= 0:
        return corpus
    rng = np.random.default_rng(seed)
    dim = corpus.dense.shape[1]
    src = np.arange(extra) % len(corpus.ids)
    rows = corpus.dense[src] + rng.standard_normal((extra, dim)).astype(np.float32) * (
        NOISE / dim**0.5
    )
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = corpus.ids + [f"00000000-0000-4000-8000-{i:012d}" for i in range(extra)]
    sparse = corpus.sparse + [corpus.sparse[i] for i in src]
    return StoredVectors(ids, np.vstack([corpus.dense, rows]), sparse)


def fill(store: EdgeStore, corpus: StoredVectors, batch: int = 1000) -> None:
    for start in range(0, len(corpus.ids), batch):
        stop = min(start + batch, len(corpus.ids))
        store.upsert(
            [
                StoredPoint(
                    corpus.ids[i],
                    corpus.dense[i].tolist(),
                    corpus.sparse[i],
                    {"doc_id": f"d{i}", "i": i},
                )
                for i in range(start, stop)
            ]
        )
    store.flush()


def exact_top(shard: Any, queries: Matrix, limit: int) -> list[list[str]]:
    params = qe.SearchParams(exact=True)
    out = []
    for q in queries:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(q.tolist(), using=DENSE_VECTOR),
            with_payload=False,
            with_vector=False,
            params=params,
        )
        out.append([str(p.id) for p in shard.query(request)])
    return out


@dataclass(frozen=True)
class Row:
    ef: int
    recall10: float
    recall50: float
    perfect10: float
    worst10: float
    p50_ms: float
    p95_ms: float


def recall(truth: Sequence[Sequence[str]], got: Sequence[Sequence[str]], k: int) -> list[float]:
    return [len(set(t[:k]) & set(g[:k])) / k for t, g in zip(truth, got, strict=True)]


def measure(
    store: EdgeStore, ef: int, queries: Matrix, truth10: list[list[str]], truth50: list[list[str]]
) -> Row:
    def top10(q: Any) -> list[str]:
        return [h.point_id for h in store.query_dense(q.tolist(), K)]

    timing, got10 = time_each(top10, queries, warm=queries[:20])
    got50 = [[h.point_id for h in store.query_dense(q.tolist(), 50)] for q in queries]
    r10 = recall(truth10, got10, K)
    r50 = recall(truth50, got50, 50)
    return Row(
        ef=ef,
        recall10=statistics.fmean(r10),
        recall50=statistics.fmean(r50),
        perfect10=sum(r == 1.0 for r in r10) / len(r10),
        worst10=min(r10),
        p50_ms=timing.p50,
        p95_ms=timing.p95,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli(__doc__)
    parser.add_argument("--index", type=Path, default=DEFAULT_INDEX, help="SciFact eval index")
    parser.add_argument("--data", type=Path, default=None, help="SciFact folder (BEIR layout)")
    parser.add_argument("--ef", type=int, nargs="+", default=list(EFS))
    parser.add_argument("--synthetic", type=int, default=0, help="pad to N points (SYNTHETIC)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    data = args.data or data_dir("scifact")
    say(f"HNSW recall@{K} vs exact, real MiniLM embeddings of SciFact; {machine()}, qdrant-edge-py")
    say(load_line("at start"))
    with tempfile.TemporaryDirectory(prefix="ctxr-hnsw-") as tmp:
        corpus = scifact_vectors(args.index, data, Path(tmp))
        real = len(corpus.ids)
        if args.synthetic:
            corpus = add_synthetic(corpus, args.synthetic, args.seed)
            say(f"padded to {len(corpus.ids):,} points with SYNTHETIC noisy copies")
        _, queries = embed_queries(data)

        # Sanity: Qdrant's exact search agrees with numpy's brute-force cosine.
        path = Path(tmp) / "recall-shard"
        store = EdgeStore.create(path, corpus.dense.shape[1])
        with Span() as span:
            fill(store, corpus)
        say(f"upserted {len(corpus.ids):,} points in {span.seconds:.1f} s")
        info = store._shard.info()  # a bench may look inside
        say(
            f"before optimize: {info.segments_count} segments, indexed_vectors_count "
            f"{info.indexed_vectors_count:,} (the BM25 sparse index counts too)"
        )
        with Span() as span:
            changed = store.optimize()
        optimize_s = span.seconds
        info = store._shard.info()
        hnsw_built = info.indexed_vectors_count >= 2 * info.points_count
        say(
            f"optimize() {optimize_s:.1f} s (returned {changed}): {info.segments_count} segments, "
            f"indexed_vectors_count {info.indexed_vectors_count:,} of {info.points_count:,} "
            f"points x 2 vectors -> dense HNSW built: {hnsw_built}"
        )
        store.flush()
        store.close()

        shard = qe.EdgeShard.load(str(path))
        try:
            truth10 = exact_top(shard, queries, K)
            truth50 = exact_top(shard, queries, 50)
            order = np.argsort(-(queries @ corpus.dense.T), axis=1)[:, :K]
            brute = [[corpus.ids[j] for j in row] for row in order]
            agree = statistics.fmean(recall(brute, truth10, K))
            say(f"exact=True vs numpy brute-force cosine top-{K}: overlap {agree:.4f}")
            for q in queries:  # page the graph and vectors in before the first timed ef
                EdgeStore(shard, max(args.ef)).query_dense(q.tolist(), 50)
            rows = [measure(EdgeStore(shard, ef), ef, queries, truth10, truth50) for ef in args.ef]
        finally:
            shard.close()

    say()
    say(
        f"## HNSW vs exact, {len(corpus.ids):,} points ({real:,} real SciFact chunk vectors"
        + (f" + {len(corpus.ids) - real:,} SYNTHETIC" if len(corpus.ids) > real else "")
        + f"), {len(queries)} real queries, m=16, ef_construct=100"
    )
    say(
        "| hnsw_ef | recall@10 | recall@50 (limit 50) | queries with 10/10 | worst query "
        "| p50 ms | p95 ms |"
    )
    say("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        say(
            f"| {r.ef} | {r.recall10:.4f} | {r.recall50:.4f} | {r.perfect10:.1%} | "
            f"{r.worst10:.1f} | {r.p50_ms:.2f} | {r.p95_ms:.2f} |"
        )
    ok = [r.ef for r in rows if r.recall10 >= TARGET]
    say()
    say(
        f"smallest ef with recall@{K} >= {TARGET}: {min(ok) if ok else 'none measured'}"
        f"; optimize() {optimize_s:.1f} s"
    )
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
