"""The code set's rankings kept on disk, and Pass@k read from them: what tuning on
anthropic-codebase scores, without indexing the set again for every combination.

`build_rankings` indexes the set once per combination of chunking constants (outline contexts,
as the default ``ctxr eval`` row) under a work folder and keeps each query's dense and BM25
top-50 with their scores; `recall_at` fuses them offline with the same DBSF as
``ctxr.retrieve.fusion`` at any BM25 weight. `cross_validate` picks a combination on some
folds of the queries and scores it on the held-out one.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from bench.common.checkout import data_dir
from bench.common.measure import Span
from ctxr.config import load_settings
from ctxr.enrich.split import code as code_split
from ctxr.eval.datasets import load_anthropic_codebase
from ctxr.eval.judging import spans_match
from ctxr.eval.runner import eval_cache_dir, to_documents
from ctxr.index import components
from ctxr.pipeline.build import index_documents
from ctxr.retrieve.fusion import distribution_based_score_fusion
from ctxr.retrieve.service import SearchService

KS = (5, 10, 20)
Key = TypeVar("Key", bound=Hashable)


def build_rankings(
    work: Path, floor: float, prefix: float, k1: float, b: float, context: str = "outline"
) -> dict[str, object]:
    """Index the set with these constants; each query's dense and BM25 top-50, and spans.

    `context` is "outline", "none", or an outline with parts left out (`outline_parts`
    sets `ctxr.enrich.situate.outline.outline_context` for those before calling). Kept in
    `work` as JSON: a second call with the same constants reads it back."""
    name = f"floor{floor:g}-prefix{prefix:g}-k1{k1:g}-b{b:g}"
    if context != "outline":
        name += f"-{context}"
    cached = work / f"{name}.json"
    if cached.exists():
        return dict(json.loads(cached.read_text()))
    code_split.FLOOR_SHARE, code_split.PREFIX_SHARE = floor, prefix
    settings = load_settings(
        index_dir=work / name,
        context="none" if context == "none" else "outline",
        cache_dir=eval_cache_dir(load_settings()),
        bm25_k1=k1,
        bm25_b=b,
    )
    dataset = load_anthropic_codebase(data_dir("anthropic-codebase"))
    with Span() as span:
        report = index_documents(
            to_documents(dataset, "anthropic-codebase"), settings, rebuild=True
        )
        embedder = components.make_embedder(settings, cached=True)
        service = SearchService(settings, embedder=embedder)
        try:
            texts = [q.text for q in dataset.queries]
            retrieved = service.retrieve(texts, "hybrid", 50)
            hybrid = service.search_many(texts, k=20, mode="hybrid", candidates=50, fusion="dbsf")
        finally:
            service.close()
    spans = {c.chunk_key: (c.doc_id, c.start, c.end) for d in dataset.documents for c in d.chunks}
    points: dict[str, tuple[str, int, int]] = {}
    queries = []
    for query, rankings, hits in zip(dataset.queries, retrieved, hybrid, strict=True):
        for ranking in rankings.values():
            for r in ranking:
                points[r.point_id] = (r.payload["doc_id"], r.payload["start"], r.payload["end"])
        queries.append(
            {
                "gold": [spans[key] for key in query.qrels],
                "dense": [(r.point_id, r.score) for r in rankings["dense"]],
                "bm25": [(r.point_id, r.score) for r in rankings["bm25"]],
                "hybrid": [h.chunk_id for h in hits],
            }
        )
    body = {
        "name": name,
        "chunks": report.chunks_written,
        "sizes": report.chunk_sizes,
        "seconds": round(span.seconds, 1),
        "points": points,
        "queries": queries,
    }
    cached.write_text(json.dumps(body))
    return body


def recall_at(body: dict[str, object], weight: float) -> list[list[float]]:
    """Per query, the share of its golden chunks in the top k, for each k in KS."""
    points = body["points"]
    assert isinstance(points, dict)
    out = []
    for q in body["queries"]:  # type: ignore[attr-defined]
        fused = distribution_based_score_fusion(
            {"dense": q["dense"], "bm25": q["bm25"]}, weights={"dense": 1.0, "bm25": weight}
        )
        found: dict[int, int] = {}
        for rank, item in enumerate(fused[: max(KS)], start=1):
            doc, start, end = points[item.key]
            for i, (gdoc, gstart, gend) in enumerate(q["gold"]):
                if i not in found and gdoc == doc and spans_match(gstart, gend, start, end):
                    found[i] = rank
        n = len(q["gold"])
        out.append([sum(1 for r in found.values() if r <= k) / n for k in KS])
    return out


def mean_rows(rows: Sequence[list[float]]) -> list[float]:
    """Pass@k for each k in KS, in percent, over the queries' rows."""
    return [100 * statistics.fmean(r[i] for r in rows) for i in range(len(KS))]


def cross_validate(
    table: Mapping[Key, list[list[float]]], folds: int, seed: int
) -> tuple[list[Key], list[list[float]]]:
    """k-fold CV over the queries: for each fold, the row of `table` (per query, Pass@k for each
    k) with the best mean on the other folds, and each query's figures from the row picked
    without it. Returns the folds' picks and the held-out rows."""
    n = len(next(iter(table.values())))
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fold_of = {q: i % folds for i, q in enumerate(order)}
    held: list[list[float]] = [[] for _ in range(n)]
    picks = []
    for fold in range(folds):
        train = [q for q in range(n) if fold_of[q] != fold]
        best = max(table, key=lambda c: statistics.fmean(sum(table[c][q]) for q in train))
        picks.append(best)
        for q in range(n):
            if fold_of[q] == fold:
                held[q] = table[best][q]
    return picks, held
