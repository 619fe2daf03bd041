"""Search latency at scale: index a synthetic corpus and time SearchService per mode.

What is real and what is synthetic:

* Texts are synthetic (deterministic seed): Zipf-distributed words from a generated vocabulary
  of real English and real-looking words plus code identifiers (camelCase, snake_case,
  dotted), 50-150 words per chunk, 10 chunks per document.
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
import hashlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ctxr.config import Settings, load_settings
from ctxr.index import components
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.weights import document_vector
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.index.manifest import DocumentEntry, Manifest
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import StoredPoint
from ctxr.index.store.edge import EdgeStore
from ctxr.retrieve.service import SearchService
from ctxr.types import chunk_id_for

MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")
CHUNKS_PER_DOC = 10
WARMUP = 20
K = 10
NOISE = 0.5  # norm of the noise added to a pool vector: cosine to it ~ 1/sqrt(1 + NOISE**2)
ZIPF_S = 1.07

# Real words (prose and code), extended with generated real-looking ones to VOCAB_SIZE.
_REAL_WORDS_TEXT = """
the of and to in is for that with on as it be by this are or from at an not was can which
have has all will if when data file index search query vector token chunk document model
server client request response error value type function method class module package config
setting option default path name user time date list table field record key cache store
memory disk thread process queue event handler stream buffer parser format schema version
build test release deploy install update delete create read write open close start stop run
load save send receive connect retry timeout limit batch size count score rank weight filter
sort merge split join match replace encode decode compress hash sign verify token session
account password permission role policy network socket port address host domain proxy route
log metric trace alert monitor report dashboard chart graph node edge tree leaf root branch
commit merge rebase diff patch issue review comment note section heading paragraph sentence
word term phrase language english retrieval embedding similarity distance cosine nearest
neighbour graph layer segment shard replica cluster collection payload point sparse dense
hybrid fusion reciprocal lexical semantic context prompt answer question source citation
"""
_SYLLABLES_TEXT = """
ka ri to mo ne sa lu vi de po ra ti ko me na shi ba gre tan vel mor dex pli quo zen fra lin
ber cor dan el ix on ul ar est ion ent al ism ure ory ate ive ous ant ly ize
"""
_REAL_WORDS = _REAL_WORDS_TEXT.split()
_SYLLABLES = _SYLLABLES_TEXT.split()
VOCAB_SIZE = 4000
IDENTIFIERS = 600


@dataclass(frozen=True)
class Corpus:
    texts: list[str]
    vocab: list[str]
    probs: npt.NDArray[np.float64]


def make_vocab(rng: np.random.Generator) -> list[str]:
    """Real words first (they get the most frequent ranks), then pseudo-words, then identifiers."""
    words = list(dict.fromkeys(_REAL_WORDS))
    seen = set(words)
    while len(words) < VOCAB_SIZE - IDENTIFIERS:
        n = int(rng.integers(2, 5))
        word = "".join(str(s) for s in rng.choice(_SYLLABLES, size=n))
        if word not in seen:
            seen.add(word)
            words.append(word)
    base = words[40:1500]
    while len(words) < VOCAB_SIZE:
        a, b, c = (str(w) for w in rng.choice(base, size=3))
        style = int(rng.integers(0, 4))
        if style == 0:
            ident = a + b.capitalize()  # camelCase
        elif style == 1:
            ident = f"{a}_{b}"  # snake_case
        elif style == 2:
            ident = f"{a}.{b}_{c}"  # dotted
        else:
            ident = a.capitalize() + b.capitalize() + c.capitalize()  # PascalCase
        if ident not in seen:
            seen.add(ident)
            words.append(ident)
    # Shuffle identifiers into the middle of the rank order so some are frequent, most rare.
    order = list(range(len(words)))
    tail = order[300:]
    rng.shuffle(tail)
    return [words[i] for i in order[:300] + tail]


def make_corpus(chunks: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    vocab = make_vocab(rng)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    probs = ranks**-ZIPF_S
    probs /= probs.sum()
    lengths = rng.integers(50, 151, size=chunks)
    ids = rng.choice(len(vocab), size=int(lengths.sum()), p=probs)
    texts: list[str] = []
    pos = 0
    for n in lengths:
        words = [vocab[i] for i in ids[pos : pos + n]]
        pos += int(n)
        # Sentences of ~12 words so the text reads like prose to the tokenizers.
        sentences = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
        texts.append(". ".join(s.capitalize() for s in sentences) + ".")
    return Corpus(texts=texts, vocab=vocab, probs=probs)


def make_queries(corpus: Corpus, count: int, seed: int) -> list[str]:
    """2-6 words drawn from the same Zipf law minus the 30 commonest words (as users type)."""
    rng = np.random.default_rng(seed + 1)
    probs = corpus.probs.copy()
    probs[:30] = 0.0
    probs /= probs.sum()
    queries = []
    for _ in range(count):
        n = int(rng.integers(2, 7))
        queries.append(" ".join(corpus.vocab[i] for i in rng.choice(len(probs), n, p=probs)))
    return queries


def synthetic_dense(
    pool: npt.NDArray[np.float32], start: int, stop: int, seed: int
) -> npt.NDArray[np.float32]:
    """Rows start..stop: chunk i < len(pool) keeps its real embedding; others get noise."""
    rng = np.random.default_rng(seed + 2 + start)
    rows = pool[np.arange(start, stop) % len(pool)].astype(np.float32)
    dim = pool.shape[1]
    noise = rng.standard_normal((stop - start, dim)).astype(np.float32) * (NOISE / dim**0.5)
    noisy = np.arange(start, stop) >= len(pool)
    rows[noisy] += noise[noisy]
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


@dataclass
class BuildStats:
    generate_s: float = 0.0
    analyse_s: float = 0.0
    weight_s: float = 0.0
    pool_embed_s: float = 0.0
    pool_size: int = 0
    upsert_s: float = 0.0
    build_s: float = 0.0
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
    t0 = time.perf_counter()
    terms = [analyzer.terms(t) for t in corpus.texts]
    stats.analyse_s = time.perf_counter() - t0
    stats.avg_terms = sum(len(t) for t in terms) / len(terms)
    say(
        f"analysed {len(terms):,} chunks in {stats.analyse_s:.1f} s "
        f"(mean {stats.avg_terms:.1f} terms)"
    )

    pool_size = min(pool_size, len(corpus.texts))
    t0 = time.perf_counter()
    pool = embedder.embed(corpus.texts[:pool_size])
    stats.pool_embed_s = time.perf_counter() - t0
    stats.pool_size = pool_size
    say(
        f"embedded a pool of {pool_size:,} real chunks in {stats.pool_embed_s:.1f} s "
        f"({pool_size / stats.pool_embed_s:.1f} chunks/s)"
    )

    params = components.bm25_params(settings)
    manifest = Manifest(settings=components.index_settings(settings, embedder, analyzer))
    store = EdgeStore.create(store_factory.shard_path(index_dir), embedder.dim, settings.hnsw_ef)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    build_start = time.perf_counter()
    try:
        for start in range(0, len(corpus.texts), batch):
            stop = min(start + batch, len(corpus.texts))
            dense = synthetic_dense(pool, start, stop, seed)
            t0 = time.perf_counter()
            points: list[StoredPoint] = []
            for i in range(start, stop):
                doc = i // CHUNKS_PER_DOC
                doc_id = f"doc{doc:07d}"
                text = corpus.texts[i]
                points.append(
                    StoredPoint(
                        point_id=chunk_id_for(doc_id, i % CHUNKS_PER_DOC),
                        dense=dense[i - start].tolist(),
                        sparse=document_vector(terms[i], stats.avg_terms, params),
                        payload={
                            "doc_id": doc_id,
                            "source": f"synthetic/{doc_id}.md",
                            "index": i % CHUNKS_PER_DOC,
                            "start": 0,
                            "end": len(text),
                            "heading_path": [],
                            "text": text,
                            "context": "",
                            "context_kind": "none",
                        },
                    )
                )
            stats.weight_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            store.upsert(points)
            stats.upsert_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        store.flush()
        stats.upsert_s += time.perf_counter() - t0
        count = store.count()
    finally:
        store.close()
    stats.build_s = time.perf_counter() - build_start
    if count != len(corpus.texts):
        raise SystemExit(f"store holds {count} points, expected {len(corpus.texts)}")

    for doc_start in range(0, len(corpus.texts), CHUNKS_PER_DOC):
        doc_id = f"doc{doc_start // CHUNKS_PER_DOC:07d}"
        texts = corpus.texts[doc_start : doc_start + CHUNKS_PER_DOC]
        manifest.documents[doc_id] = DocumentEntry(
            source=f"synthetic/{doc_id}.md",
            sha256=hashlib.sha256("\n".join(texts).encode()).hexdigest(),
            recipe="bench-synthetic",
            chunks=len(texts),
            terms=sum(len(t) for t in terms[doc_start : doc_start + CHUNKS_PER_DOC]),
            context_kind="none",
            indexed_at=now,
        )
    manifest.save(index_dir)
    return stats


@dataclass(frozen=True)
class Timing:
    p50: float
    p95: float
    mean: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing:
        ms = sorted(s * 1000.0 for s in seconds)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return cls(p50=statistics.median(ms), p95=p95, mean=statistics.fmean(ms))


def time_calls(fn: Callable[[str], object], warm: Sequence[str], queries: Sequence[str]) -> Timing:
    for q in warm:
        fn(q)
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        samples.append(time.perf_counter() - t0)
    return Timing.of(samples)


def measure(
    settings: Settings,
    embedder: OnnxEmbedder,
    warm: Sequence[str],
    queries: Sequence[str],
) -> tuple[dict[str, Timing], dict[str, list[list[str]]], float]:
    t0 = time.perf_counter()
    service = SearchService(settings, embedder=embedder)
    open_s = time.perf_counter() - t0
    timings: dict[str, Timing] = {}
    results: dict[str, list[list[str]]] = {}
    with service:
        for mode in MODES:
            search = functools.partial(service.search, k=K, mode=mode)
            timings[mode] = time_calls(search, warm, queries)
            results[mode] = [[h.chunk_id for h in service.search(q, K, mode)] for q in queries]
            say(f"  {mode:<6} p50 {timings[mode].p50:7.2f} ms  p95 {timings[mode].p95:7.2f} ms")
    return timings, results, open_s


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    """Mean share of the top-K ids in `a` also found in `b` (recall of b against a)."""
    shares = [len(set(x) & set(y)) / max(len(x), 1) for x, y in zip(a, b, strict=True)]
    return statistics.fmean(shares)


def dir_size(path: Path) -> int:
    """Bytes allocated on disk (like `du`); Qdrant preallocates sparse mmap files."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def apparent_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def say(line: str) -> None:
    print(line, flush=True)


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
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
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    say(
        f"ctxr search latency: {args.chunks:,} chunks, {args.queries} queries/mode "
        f"(+{WARMUP} warm-up), k={K}; {cores} cores, {platform.machine()}, "
        f"Python {platform.python_version()}; index at {index_dir}"
    )
    settings = load_settings(index_dir=index_dir)
    embedder = OnnxEmbedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    analyzer = components.make_analyzer(settings)

    t0 = time.perf_counter()
    corpus = make_corpus(args.chunks, args.seed)
    generate_s = time.perf_counter() - t0
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
    size_plain = dir_size(index_dir)
    say(
        f"index size on disk: {size_plain / 2**20:,.0f} MiB allocated "
        f"({apparent_size(index_dir) / 2**20:,.0f} MiB apparent)"
    )

    embed_t = time_calls(lambda q: embedder.embed([q]), warm, queries)
    say(f"query embedding alone: p50 {embed_t.p50:.2f} ms  p95 {embed_t.p95:.2f} ms")

    say("exact search (plain segments, as after a bulk load):")
    plain, plain_hits, open_plain_s = measure(settings, embedder, warm, queries)
    hnsw: dict[str, Timing] | None = None
    optimize_s = 0.0
    size_opt = size_plain
    recall: dict[str, float] = {}
    open_opt_s = 0.0
    if not args.skip_optimize:
        store = EdgeStore.open(store_factory.shard_path(index_dir), settings.hnsw_ef)
        try:
            t0 = time.perf_counter()
            changed = store.optimize()
            store.flush()
            optimize_s = time.perf_counter() - t0
        finally:
            store.close()
        size_opt = dir_size(index_dir)
        say(
            f"optimize() took {optimize_s:.1f} s (returned {changed}); "
            f"index size now {size_opt / 2**20:,.0f} MiB"
        )
        say(f"after optimize (HNSW, hnsw_ef={settings.hnsw_ef}):")
        hnsw, opt_hits, open_opt_s = measure(settings, embedder, warm, queries)
        recall = {m: overlap(plain_hits[m], opt_hits[m]) for m in MODES}

    say("")
    say(
        f"## {args.chunks:,} chunks, latency in ms per SearchService.search (k={K}, "
        f"candidates={settings.candidates})"
    )
    for line in fmt_table(plain, hnsw):
        say(line)
    say("")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
