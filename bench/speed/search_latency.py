"""Search latency at scale: index a synthetic corpus and time SearchService per mode.

What is real and what is synthetic:

* Texts are synthetic (deterministic seed, `bench.common.synthetic`): Zipf-distributed words
  from a generated vocabulary of real English and real-looking words plus code identifiers
  (camelCase, snake_case, dotted), 50-150 words per chunk, 10 chunks per document.
* BM25 is real: every chunk is analysed with the real ``Bm25Analyzer`` and weighted with the
  real ``document_vector``, using the corpus's true average length.
* Dense vectors are partly synthetic: embedding 100k chunks with the local MiniLM would take
  about 40 minutes on 2 cores, so a pool of ``--pool`` chunks is embedded with the real
  ``OnnxEmbedder`` and every other chunk gets a pool vector plus Gaussian noise, renormalised
  (cosine to its pool vector about 0.9). Latency depends on the vectors' geometry only
  mildly for exact search; HNSW recall figures on such clustered vectors are indicative only.
* Points go straight through ``EdgeStore.upsert`` in batches, the manifest is written with
  ``components.index_settings``, and every timed search goes through ``SearchService``.

Usage::

    python -m bench.speed.search_latency [--chunks 100000] [--queries 200] [--dir DIR]
        [--skip-optimize]
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common.measure import (
    Span,
    Timing,
    disk_bytes,
    load_line,
    machine,
    peak_mib,
    say,
    time_each,
)
from bench.common.measure import parser as cli
from bench.common.synthetic import (
    CHUNKS_PER_DOC,
    NOISE,
    ZIPF_S,
    Corpus,
    document_entries,
    make_corpus,
    make_queries,
    stored_points,
    synthetic_dense,
)
from ctxr.config import Settings, load_settings
from ctxr.index import components
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.index.manifest import Manifest
from ctxr.index.store import factory as store_factory
from ctxr.index.store.edge import EdgeStore
from ctxr.retrieve.service import SearchService

MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")
WARMUP = 20
K = 10


@dataclass
class BuildStats:
    analyse_s: float = 0.0
    weight_s: float = 0.0
    pool_embed_s: float = 0.0
    pool_size: int = 0
    upsert_s: float = 0.0
    points: int = 0
    avg_terms: float = 0.0


def build_index(
    index_dir: Path,
    settings: Settings,
    embedder: OnnxEmbedder,
    analyzer: Bm25Analyzer,
    corpus: Corpus,
    pool_size: int,
    batch: int,
    seed: int,
) -> BuildStats:
    stats = BuildStats(points=len(corpus.texts))
    with Span() as span:
        terms = [analyzer.terms(t) for t in corpus.texts]
    stats.analyse_s = span.seconds
    stats.avg_terms = sum(len(t) for t in terms) / len(terms)
    say(
        f"analysed {len(terms):,} chunks in {stats.analyse_s:.1f} s "
        f"(mean {stats.avg_terms:.1f} terms)"
    )

    pool_size = min(pool_size, len(corpus.texts))
    with Span() as span:
        pool = embedder.embed(corpus.texts[:pool_size])
    stats.pool_embed_s = span.seconds
    stats.pool_size = pool_size
    say(
        f"embedded a pool of {pool_size:,} real chunks in {stats.pool_embed_s:.1f} s "
        f"({pool_size / stats.pool_embed_s:.1f} chunks/s)"
    )

    params = components.bm25_params(settings)
    manifest = Manifest(settings=components.index_settings(settings, embedder, analyzer))
    store = EdgeStore.create(
        store_factory.shard_path(index_dir), embedder.dim, settings.store.hnsw_ef
    )
    try:
        for start in range(0, len(corpus.texts), batch):
            stop = min(start + batch, len(corpus.texts))
            dense = synthetic_dense(pool, start, stop, seed)
            with Span() as span:
                points = stored_points(corpus.texts, terms, dense, start, stats.avg_terms, params)
            stats.weight_s += span.seconds
            with Span() as span:
                store.upsert(points)
            stats.upsert_s += span.seconds
        with Span() as span:
            store.flush()
        stats.upsert_s += span.seconds
        count = store.count()
    finally:
        store.close()
    if count != len(corpus.texts):
        raise SystemExit(f"store holds {count} points, expected {len(corpus.texts)}")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest.documents.update(document_entries(corpus.texts, terms, "bench-synthetic", now))
    manifest.save(index_dir)
    return stats


def measure(
    settings: Settings,
    embedder: OnnxEmbedder,
    warm: Sequence[str],
    queries: Sequence[str],
) -> tuple[dict[str, Timing], dict[str, list[list[str]]], float]:
    with Span() as span:
        service = SearchService(settings, embedder=embedder)
    open_s = span.seconds
    timings: dict[str, Timing] = {}
    results: dict[str, list[list[str]]] = {}
    with service:
        for mode in MODES:
            search = functools.partial(service.search, k=K, mode=mode)
            timings[mode], found = time_each(search, queries, warm=warm)
            results[mode] = [[h.chunk_id for h in hits] for hits in found]
            say(f"  {mode:<6} p50 {timings[mode].p50:7.2f} ms  p95 {timings[mode].p95:7.2f} ms")
    return timings, results, open_s


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    """Mean share of the top-K ids in `a` also found in `b` (recall of b against a)."""
    shares = [len(set(x) & set(y)) / max(len(x), 1) for x, y in zip(a, b, strict=True)]
    return statistics.fmean(shares)


def apparent_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def fmt_table(plain: dict[str, Timing], hnsw: dict[str, Timing] | None) -> list[str]:
    head = "| mode | exact p50 | exact p95 | exact mean |"
    rule = "|---|---:|---:|---:|"
    if hnsw:
        head += " HNSW p50 | HNSW p95 | HNSW mean | exact/HNSW p50 |"
        rule += "---:|---:|---:|---:|"
    lines = [head, rule]
    for mode in MODES:
        p = plain[mode]
        row = f"| {mode} | {p.p50:.2f} | {p.p95:.2f} | {p.mean:.2f} |"
        if hnsw:
            h = hnsw[mode]
            row += f" {h.p50:.2f} | {h.p95:.2f} | {h.mean:.2f} | {p.p50 / h.p50:.1f}x |"
        lines.append(row)
    return lines


def fmt_ratios(label: str, t: dict[str, Timing]) -> str:
    return (
        f"{label}: hybrid/bm25 p50 {t['hybrid'].p50 / t['bm25'].p50:.2f}x, "
        f"hybrid/dense p50 {t['hybrid'].p50 / t['dense'].p50:.2f}x, "
        f"dense/bm25 p50 {t['dense'].p50 / t['bm25'].p50:.2f}x"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli(__doc__)
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic chunks to index")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per mode")
    parser.add_argument("--pool", type=int, default=1000, help="chunks embedded for real")
    parser.add_argument("--batch", type=int, default=1000, help="points per upsert")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="index dir (kept); default temp")
    parser.add_argument("--skip-optimize", action="store_true", help="exact search only")
    args = parser.parse_args(argv)
    if args.chunks < CHUNKS_PER_DOC or args.queries < 1 or args.pool < 1:
        parser.error("need --chunks >= 10, --queries >= 1 and --pool >= 1")

    temp = args.dir is None
    index_dir = Path(tempfile.mkdtemp(prefix="ctxr-bench-")) if temp else args.dir
    if not temp and (index_dir / "manifest.json").exists():
        parser.error(f"{index_dir} already holds an index; pass an empty or new --dir")
    index_dir.mkdir(parents=True, exist_ok=True)
    try:
        return run(args, index_dir)
    finally:
        if temp:
            shutil.rmtree(index_dir, ignore_errors=True)


def run(args: argparse.Namespace, index_dir: Path) -> int:
    say(
        f"ctxr search latency: {args.chunks:,} chunks, {args.queries} queries/mode "
        f"(+{WARMUP} warm-up), k={K}; {machine()}; index at {index_dir}"
    )
    say(load_line("at start"))
    settings = load_settings(index_dir=index_dir)
    embedder = OnnxEmbedder(
        batch_size=settings.embed.embed_batch_size, threads=settings.embed.embed_threads
    )
    analyzer = components.make_analyzer(settings)

    with Span() as span:
        corpus = make_corpus(args.chunks, args.seed)
    generate_s = span.seconds
    say(
        f"generated {len(corpus.texts):,} chunks in {generate_s:.1f} s "
        f"(vocabulary {len(corpus.vocab):,}, Zipf s={ZIPF_S})"
    )
    all_queries = make_queries(corpus, WARMUP + args.queries, args.seed)
    warm, queries = all_queries[:WARMUP], all_queries[WARMUP:]

    stats = build_index(
        index_dir, settings, embedder, analyzer, corpus, args.pool, args.batch, args.seed
    )
    say(
        f"upserted {stats.points:,} points in {stats.upsert_s:.1f} s "
        f"({stats.points / stats.upsert_s:,.0f} points/s through EdgeStore.upsert; "
        f"BM25 weighting + point building {stats.weight_s:.1f} s)"
    )
    size_plain = disk_bytes(index_dir)
    say(
        f"index size on disk: {size_plain / 2**20:,.0f} MiB allocated "
        f"({apparent_size(index_dir) / 2**20:,.0f} MiB apparent)"
    )

    embed_t, _ = time_each(lambda q: embedder.embed([q]), queries, warm=warm)
    say(f"query embedding alone: p50 {embed_t.p50:.2f} ms  p95 {embed_t.p95:.2f} ms")

    say("exact search (plain segments, as after a bulk load):")
    plain, plain_hits, open_plain_s = measure(settings, embedder, warm, queries)
    hnsw: dict[str, Timing] | None = None
    optimize_s = 0.0
    size_opt = size_plain
    recall: dict[str, float] = {}
    open_opt_s = 0.0
    if not args.skip_optimize:
        store = EdgeStore.open(store_factory.shard_path(index_dir), settings.store.hnsw_ef)
        try:
            with Span() as span:
                changed = store.optimize()
                store.flush()
            optimize_s = span.seconds
        finally:
            store.close()
        size_opt = disk_bytes(index_dir)
        say(
            f"optimize() took {optimize_s:.1f} s (returned {changed}); "
            f"index size now {size_opt / 2**20:,.0f} MiB"
        )
        say(f"after optimize (HNSW, hnsw_ef={settings.store.hnsw_ef}):")
        hnsw, opt_hits, open_opt_s = measure(settings, embedder, warm, queries)
        recall = {m: overlap(plain_hits[m], opt_hits[m]) for m in MODES}

    say()
    say(
        f"## {args.chunks:,} chunks, latency in ms per SearchService.search (k={K}, "
        f"candidates={settings.search.candidates})"
    )
    for line in fmt_table(plain, hnsw):
        say(line)
    say()
    say(
        f"query embedding alone (OnnxEmbedder.embed, 1 query): p50 {embed_t.p50:.2f} ms, "
        f"p95 {embed_t.p95:.2f} ms, mean {embed_t.mean:.2f} ms"
    )
    say(fmt_ratios("exact", plain))
    if hnsw:
        say(fmt_ratios("HNSW ", hnsw))
        say("top-10 overlap, HNSW vs exact: " + ", ".join(f"{m} {recall[m]:.3f}" for m in MODES))
        say(f"optimize(): {optimize_s:.1f} s")
    say(
        f"upsert: {stats.points / stats.upsert_s:,.0f} points/s "
        f"({stats.points:,} points, batches of {args.batch})"
    )
    say(
        f"index size (allocated): {size_plain / 2**20:,.0f} MiB plain"
        + (f", {size_opt / 2**20:,.0f} MiB after optimize" if hnsw else "")
    )
    say(
        f"SearchService open: {open_plain_s * 1000:.0f} ms plain"
        + (f", {open_opt_s * 1000:.0f} ms after optimize" if hnsw else "")
    )
    say(
        f"build: generate {generate_s:.1f} s, analyse {stats.analyse_s:.1f} s, "
        f"pool embed {stats.pool_embed_s:.1f} s ({stats.pool_size} real chunks), "
        f"weight+points {stats.weight_s:.1f} s, upsert {stats.upsert_s:.1f} s"
    )
    say(
        f"dense vectors: {stats.pool_size:,} real MiniLM embeddings; the other "
        f"{max(stats.points - stats.pool_size, 0):,} are pool vectors + Gaussian noise "
        f"(norm {NOISE}), renormalised - SYNTHETIC"
    )
    say(f"peak RSS {peak_mib():,.0f} MiB")
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
