"""ctxr hybrid search against the common peer stack, side by side at 100k chunks.

Peer stack: ``rank_bm25.BM25Okapi`` over the same analysed terms, plus ``QdrantClient(":memory:")``
(qdrant-client local mode) for the dense top-N, fused in Python with reciprocal rank fusion
(k=60), top-10 texts returned. ctxr: ``SearchService.search(query, k=10, mode="hybrid")`` on the
embedded edge backend, before and after ``optimize()`` (HNSW), with the configured fusion (DBSF)
and with RRF (the peer's fusion). Both sides retrieve 50 candidates per retriever.

What is real and what is synthetic (the corpus is `bench.common.synthetic`'s, as in
``bench.speed.search_latency``):

* Texts are synthetic Zipf prose with code identifiers; BM25 terms are real ``Bm25Analyzer``
  output, shared by both stacks (ctxr weights them with ``document_vector``; rank-bm25 with its
  own Okapi weights).
* Dense vectors are real-shaped, not real: a pool of real MiniLM chunk vectors (the SciFact eval
  index's 12,341 vectors when it exists, else ``--pool`` synthetic texts embedded now), and each
  further chunk is a pool vector plus Gaussian noise (norm 0.5), renormalised. Query vectors
  are the real MiniLM embeddings of the query strings, computed once before timing: every
  latency here EXCLUDES query embedding (ctxr gets them through a lookup embedder, so the rest
  of ``SearchService.search`` runs as in production).
* Each stack runs in its own subprocess, so peak RSS (`bench.common.measure.peak_mib`, which
  sees Rust and numpy allocations that tracemalloc does not) is not mixed; "extra" is peak
  minus the RSS after the shared corpus was loaded.

Usage::

    python -m bench.peers.peer_compare [--chunks 100000] [--queries 200] [--peer-queries 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.common.checkout import child_env
from bench.common.measure import (
    Span,
    Timing,
    load_line,
    machine,
    peak_mib,
    rss_mib,
    say,
    time_each,
)
from bench.common.measure import parser as cli
from bench.common.stored_vectors import DEFAULT_INDEX, read_vectors
from bench.common.synthetic import (
    CHUNKS_PER_DOC,
    NOISE,
    doc_id,
    document_entries,
    make_corpus,
    make_queries,
    stored_points,
    synthetic_dense,
)
from ctxr.config import load_settings
from ctxr.index import components
from ctxr.index.embed.base import FloatMatrix
from ctxr.index.embed.onnx import DIM, MODEL_NAME, OnnxEmbedder
from ctxr.index.manifest import Manifest
from ctxr.index.store import factory as store_factory
from ctxr.index.store.edge import EdgeStore
from ctxr.retrieve.service import SearchService
from ctxr.types import chunk_id_for

K = 10
CANDIDATES = 50
RRF_K = 60
WARMUP = 20
PEER_WARMUP = 3
Matrix = npt.NDArray[np.float32]


@dataclass
class Shared:
    texts: list[str]
    terms: list[list[str]]
    dense: Matrix
    queries: list[str]
    query_terms: list[list[str]]
    query_vectors: Matrix


class LookupEmbedder:
    """The MiniLM's identity with precomputed query vectors: search minus the embedding."""

    def __init__(self, table: dict[str, npt.NDArray[np.float32]]) -> None:
        self._table = table

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dim(self) -> int:
        return DIM

    @property
    def max_tokens(self) -> int:
        return 256

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([self._table[t] for t in texts])


# --- ctxr -------------------------------------------------------------------------------------


def ctxr_build(data: Shared, index_dir: Path) -> float:
    settings = load_settings(index_dir=index_dir)
    analyzer = components.make_analyzer(settings)
    embedder = LookupEmbedder({})
    params = components.bm25_params(settings)
    avg = sum(len(t) for t in data.terms) / len(data.terms)
    manifest = Manifest(settings=components.index_settings(settings, embedder, analyzer))
    with Span() as span:
        store = EdgeStore.create(store_factory.shard_path(index_dir), DIM, settings.store.hnsw_ef)
        try:
            for start in range(0, len(data.texts), 1000):
                rows = data.dense[start : start + 1000]
                store.upsert(stored_points(data.texts, data.terms, rows, start, avg, params))
            store.flush()
        finally:
            store.close()
    manifest.documents.update(
        document_entries(data.texts, data.terms, "bench-peer", "2000-01-01T00:00:00Z")
    )
    manifest.save(index_dir)
    return span.seconds


def ctxr_measure(
    data: Shared, index_dir: Path, queries: int, label: str
) -> tuple[dict[str, Timing], dict[str, list[list[str]]]]:
    table = dict(zip(data.queries, data.query_vectors, strict=True))
    settings = load_settings(index_dir=index_dir)
    timings: dict[str, Timing] = {}
    hits: dict[str, list[list[str]]] = {}
    warm, timed = data.queries[:WARMUP], data.queries[WARMUP : WARMUP + queries]
    with SearchService(settings, embedder=LookupEmbedder(table)) as service:
        # One untimed pass over every query first: the shard is memory-mapped, and without it
        # the first row timed pays the page faults (about 4 ms a query at 100k here).
        service.search_many(data.queries, K, "hybrid", CANDIDATES)
        for name, mode, fusion in (
            ("hybrid-dbsf", "hybrid", "dbsf"),
            ("hybrid-rrf", "hybrid", "rrf"),
            ("dense", "dense", None),
            ("bm25", "bm25", None),
        ):

            def one(query: str, mode: str = mode, fusion: str | None = fusion) -> list[str]:
                return [h.chunk_id for h in service.search(query, K, mode, CANDIDATES, fusion)]

            timings[name], hits[name] = time_each(one, timed, warm=warm)
            t = timings[name]
            say(f"  ctxr {label:<6} {name:<11} p50 {t.p50:6.2f} ms  p95 {t.p95:6.2f} ms")
    return timings, hits


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    return statistics.fmean(len(set(x) & set(y)) / K for x, y in zip(a, b, strict=True))


def run_ctxr(data: Shared, queries: int, base_rss: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxr-peer-") as tmp:
        index_dir = Path(tmp)
        out["build_s"] = ctxr_build(data, index_dir)
        out["rss_after_build_mib"] = rss_mib()
        say(f"  ctxr build (BM25 weighting + EdgeStore.upsert + flush): {out['build_s']:.1f} s")
        plain, plain_hits = ctxr_measure(data, index_dir, queries, "exact")
        store = EdgeStore.open(store_factory.shard_path(index_dir))
        try:
            with Span() as span:
                store.optimize()
                store.flush()
            out["optimize_s"] = span.seconds
        finally:
            store.close()
        say(f"  ctxr optimize(): {out['optimize_s']:.1f} s")
        hnsw, hnsw_hits = ctxr_measure(data, index_dir, queries, "HNSW")
    out["timings"] = {
        "exact": {k: dataclasses.asdict(v) for k, v in plain.items()},
        "hnsw": {k: dataclasses.asdict(v) for k, v in hnsw.items()},
    }
    out["overlap_hnsw_vs_exact"] = {k: overlap(plain_hits[k], hnsw_hits[k]) for k in plain_hits}
    out["hits_hybrid_rrf"] = plain_hits["hybrid-rrf"]
    out["peak_mib"] = peak_mib()
    out["extra_peak_mib"] = out["peak_mib"] - base_rss
    return out


# --- the peer stack ---------------------------------------------------------------------------


def run_peer(data: Shared, queries: int, base_rss: float) -> dict[str, Any]:
    from qdrant_client import QdrantClient, models
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    out: dict[str, Any] = {}
    with Span() as span:
        bm25 = BM25Okapi(data.terms)
    out["bm25_build_s"] = span.seconds
    say(f"  peer BM25Okapi over {len(data.terms):,} chunks: {out['bm25_build_s']:.1f} s")
    client = QdrantClient(":memory:")
    with Span() as span:
        client.create_collection(
            "peer", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        )
        for start in range(0, len(data.texts), 1000):
            stop = min(start + 1000, len(data.texts))
            client.upsert(
                "peer",
                points=[
                    models.PointStruct(
                        id=i,
                        vector=data.dense[i].tolist(),
                        payload={"doc_id": doc_id(i), "text": data.texts[i]},
                    )
                    for i in range(start, stop)
                ],
            )
    out["qdrant_build_s"] = span.seconds
    out["build_s"] = out["bm25_build_s"] + out["qdrant_build_s"]
    out["rss_after_build_mib"] = rss_mib()
    say(f"  peer QdrantClient(':memory:') upsert: {out['qdrant_build_s']:.1f} s")

    parts: dict[str, list[float]] = {"bm25": [], "dense": [], "fuse": []}

    def hybrid(i: int, record: bool = True) -> list[tuple[int, str]]:
        with Span() as lexical_span:
            scores = bm25.get_scores(data.query_terms[i])
            top = np.argpartition(-scores, CANDIDATES)[:CANDIDATES]
            lexical = [int(j) for j in top[np.argsort(-scores[top])] if scores[j] > 0]
        with Span() as dense_span:
            dense = client.query_points(
                "peer", query=data.query_vectors[i].tolist(), limit=CANDIDATES, with_payload=True
            ).points
        with Span() as fuse_span:
            fused: dict[int, float] = {}
            for ranking in (lexical, [int(p.id) for p in dense]):
                for rank, key in enumerate(ranking, start=1):
                    fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank)
            best = sorted(fused, key=lambda key: -fused[key])[:K]
            result = [(key, data.texts[key]) for key in best]
        if record:
            parts["bm25"].append(lexical_span.seconds)
            parts["dense"].append(dense_span.seconds)
            parts["fuse"].append(fuse_span.seconds)
        return result

    for i in range(WARMUP - PEER_WARMUP, WARMUP):
        hybrid(i, record=False)
    timing, results = time_each(hybrid, range(WARMUP, WARMUP + queries))
    ids = [[chunk_id_for(doc_id(k), k % CHUNKS_PER_DOC) for k, _ in r] for r in results]
    say(f"  peer hybrid-rrf     p50 {timing.p50:6.2f} ms  p95 {timing.p95:6.2f} ms")
    out["timings"] = {"hybrid-rrf": dataclasses.asdict(timing)}
    out["parts"] = {k: dataclasses.asdict(Timing.of(v)) for k, v in parts.items()}
    out["hits_hybrid_rrf"] = ids
    client.close()
    out["peak_mib"] = peak_mib()
    out["extra_peak_mib"] = out["peak_mib"] - base_rss
    return out


# --- orchestration ----------------------------------------------------------------------------


def prepare(args: argparse.Namespace, path: Path) -> dict[str, float]:
    from ctxr.index.bm25.analyzer import Bm25Analyzer

    figures: dict[str, float] = {}
    with Span() as span:
        corpus = make_corpus(args.chunks, args.seed)
    figures["generate_s"] = span.seconds
    queries = make_queries(corpus, WARMUP + args.queries, args.seed)
    analyzer = Bm25Analyzer()
    with Span() as span:
        terms = [analyzer.terms(t) for t in corpus.texts]
    figures["analyse_s"] = span.seconds
    say(
        f"generated {args.chunks:,} chunks ({figures['generate_s']:.1f} s), analysed "
        f"({figures['analyse_s']:.1f} s, mean {sum(map(len, terms)) / len(terms):.1f} terms)"
    )
    embedder = OnnxEmbedder()
    if (args.pool_index / "manifest.json").exists():
        pool = read_vectors(args.pool_index).dense
        figures["pool_real_from_index"] = 1.0
        say(f"pool: {len(pool):,} real MiniLM vectors of SciFact chunks from {args.pool_index}")
    else:
        with Span() as span:
            pool = embedder.embed(corpus.texts[: args.pool])
        say(f"pool: {len(pool):,} synthetic texts embedded now ({span.seconds:.1f} s)")
    figures["pool"] = float(len(pool))
    dense = np.vstack(
        [
            synthetic_dense(pool, s, min(s + 10_000, args.chunks), args.seed)
            for s in range(0, args.chunks, 10_000)
        ]
    )
    with Span() as span:
        query_vectors = embedder.embed(queries)
    say(
        f"embedded {len(queries)} queries once ({span.seconds:.1f} s); "
        "timings below exclude query embedding"
    )
    shared = Shared(
        texts=corpus.texts,
        terms=terms,
        dense=dense,
        queries=queries,
        query_terms=[analyzer.terms(q) for q in queries],
        query_vectors=query_vectors,
    )
    with path.open("wb") as f:
        pickle.dump(shared, f, protocol=pickle.HIGHEST_PROTOCOL)
    return figures


def child(stack: str, data_path: Path, out_path: Path, queries: int) -> int:
    with data_path.open("rb") as f:
        data: Shared = pickle.load(f)  # our own temp file
    base = rss_mib()
    say(f"[{stack}] corpus loaded; RSS {base:,.0f} MiB")
    result = (run_ctxr if stack == "ctxr" else run_peer)(data, queries, base)
    result["base_rss_mib"] = base
    out_path.write_text(json.dumps(result))
    return 0


def fmt(t: dict[str, float]) -> str:
    return f"{t['p50']:.2f} | {t['p95']:.2f}"


Result = dict[str, Any]


def report(args: argparse.Namespace, figs: dict[str, float], c: Result, p: Result) -> None:
    peer = p["timings"]["hybrid-rrf"]
    say()
    say(
        f"## {args.chunks:,} chunks, hybrid search, k={K}, {CANDIDATES} candidates per retriever, "
        "query embedding excluded"
    )
    say(
        f"ctxr: {args.queries} timed queries per row (+{WARMUP} warm-up); peer stack: "
        f"{args.peer_queries} timed queries (+{PEER_WARMUP} warm-up), the first of the same list"
    )
    say("| stack | p50 ms | p95 ms | peer p50 / this p50 | peer p95 / this p95 |")
    say("|---|---:|---:|---:|---:|")
    for phase, label in (("exact", "before optimize"), ("hnsw", "after optimize (HNSW)")):
        for name in ("hybrid-dbsf", "hybrid-rrf", "dense", "bm25"):
            t = c["timings"][phase][name]
            say(
                f"| ctxr {name}, {label} | {fmt(t)} | {peer['p50'] / t['p50']:.0f}x "
                f"| {peer['p95'] / t['p95']:.0f}x |"
            )
    say(f"| peer rank-bm25 + QdrantClient(':memory:'), RRF | {fmt(peer)} | 1x | 1x |")
    bm25, dense, fuse = (p["parts"][k]["p50"] for k in ("bm25", "dense", "fuse"))
    say(
        f"peer parts: BM25Okapi.get_scores+top-50 p50 {bm25:.1f} ms, "
        f"query_points p50 {dense:.1f} ms, RRF+texts p50 {fuse:.3f} ms"
    )
    say()
    say("| figure | ctxr (edge) | peer stack |")
    say("|---|---:|---:|")
    peer_build = f"BM25Okapi {p['bm25_build_s']:.1f} + upsert {p['qdrant_build_s']:.1f}"
    say(
        f"| index build (excl. embedding and analysis) | {c['build_s']:.1f} s | "
        f"{p['build_s']:.1f} s ({peer_build}) |"
    )
    say(f"| HNSW build (optimize) | {c['optimize_s']:.1f} s | n/a (local mode is brute force) |")
    for label, key in (
        ("peak RSS", "peak_mib"),
        ("peak RSS minus corpus loaded", "extra_peak_mib"),
        ("RSS after build", "rss_after_build_mib"),
    ):
        say(f"| {label} | {c[key]:,.0f} MiB | {p[key]:,.0f} MiB |")
    n = args.peer_queries
    agree = overlap(c["hits_hybrid_rrf"][:n], p["hits_hybrid_rrf"][:n])
    say()
    say(
        "top-10 overlap, ctxr after optimize vs exact: "
        + ", ".join(f"{k} {v:.3f}" for k, v in c["overlap_hnsw_vs_exact"].items())
    )
    say(
        f"top-10 overlap, ctxr hybrid-rrf (exact) vs peer hybrid-rrf: {agree:.3f} "
        "(different BM25 weightings: ctxr's Qdrant IDF modifier vs rank-bm25's Okapi IDF)"
    )
    say(
        f"shared prep: generate {figs['generate_s']:.1f} s, analyse {figs['analyse_s']:.1f} s; "
        f"dense = {int(figs['pool']):,} real MiniLM pool vectors + Gaussian noise {NOISE} "
        "(SYNTHETIC)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli(__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200, help="timed ctxr queries per row")
    parser.add_argument("--peer-queries", type=int, default=50, help="timed peer queries")
    parser.add_argument("--pool", type=int, default=1000, help="texts embedded if no pool index")
    parser.add_argument("--pool-index", type=Path, default=DEFAULT_INDEX)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--child", choices=("ctxr", "peer"), help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        n = args.queries if args.child == "ctxr" else args.peer_queries
        return child(args.child, args.data, args.out, n)
    args.peer_queries = min(args.peer_queries, args.queries)
    say(f"ctxr vs rank-bm25 + QdrantClient local: {args.chunks:,} chunks; {machine()}")
    say(load_line("at start"))
    with tempfile.TemporaryDirectory(prefix="ctxr-peer-data-") as tmp:
        data_path = Path(tmp) / "shared.pickle"
        figs = prepare(args, data_path)
        results: dict[str, dict[str, Any]] = {}
        for stack in ("ctxr", "peer"):
            out = Path(tmp) / f"{stack}.json"
            # Each stack in a process of its own, so that each peak RSS is its own.
            cmd = [sys.executable, "-m", __spec__.name, "--child", stack, "--data", str(data_path),
                   "--out", str(out), "--queries", str(args.queries),
                   "--peer-queries", str(args.peer_queries)]  # fmt: skip
            subprocess.run(cmd, check=True, env=child_env())
            results[stack] = json.loads(out.read_text())
    report(args, figs, results["ctxr"], results["peer"])
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
