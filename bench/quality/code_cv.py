"""Cross-validated choice of the code-set constants: chunk floor, prefix share,
BM25 k1/b and the DBSF weight of BM25, on anthropic-codebase with ctxr's own chunks.

Every constant tuned on the code set is chosen here, never on the queries it is scored on: the
248 queries are shuffled once (``--seed``) into ``--folds`` folds; for each fold the
combination with the best mean of Pass@5, @10 and @20 over the *other* folds is picked and
scored on the held-out fold. The figure reported is the held-out folds' mean (every query
scored once, by a combination chosen without it), beside the untuned default and the
combination that is best on all queries (which is optimistic, shown only for contrast).

Each chunking combination builds an index (outline contexts, as the default `ctxr eval`
row) under ``--work`` and stores each query's dense and BM25 top-50 with their scores;
fusions are then computed offline with the same DBSF as ``ctxr.retrieve.fusion`` (checked
against the service's hybrid ranking at weight 1). Rankings are kept in ``--work``, so a
rerun with more combinations embeds only what is new (the embedding cache keys on text).

Usage::

    python -m bench.quality.code_cv [--floors 0,0.25,0.4] [--prefixes 0.0625,0.125,0.25]
        [--bm25 1.2:0.75,0.9:0.4] [--weights 0.8,1,1.2,1.5,2] [--folds 5] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from ctxr.config import load_settings
from ctxr.enrich.split import code as code_split
from ctxr.eval.datasets import default_data_dir, load_anthropic_codebase
from ctxr.eval.judging import spans_match
from ctxr.eval.runner import eval_cache_dir, to_documents
from ctxr.index import components
from ctxr.pipeline.build import index_documents
from ctxr.retrieve.fusion import distribution_based_score_fusion
from ctxr.retrieve.service import SearchService

KS = (5, 10, 20)
Key = TypeVar("Key", bound=Hashable)
Ranking = list[tuple[str, float]]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def build_rankings(
    work: Path, floor: float, prefix: float, k1: float, b: float, context: str = "outline"
) -> dict[str, object]:
    """Index the set with these constants; each query's dense and BM25 top-50, and spans.

    `context` is "outline", "none", or an outline with parts left out (`outline_parts.py`
    sets `ctxr.enrich.situate.outline.outline_context` for those before calling)."""
    name = f"floor{floor:g}-prefix{prefix:g}-k1{k1:g}-b{b:g}"
    if context != "outline":
        name += f"-{context}"
    cached = work / f"{name}.json"
    if cached.exists():
        return dict(json.loads(cached.read_text()))
    code_split.FLOOR_SHARE, code_split.PREFIX_SHARE = floor, prefix
    base = load_settings()
    settings = base.model_copy(
        update={
            "index_dir": work / name,
            "context": "none" if context == "none" else "outline",
            "cache_dir": eval_cache_dir(base),
            "bm25_k1": k1,
            "bm25_b": b,
        }
    )
    dataset = load_anthropic_codebase(default_data_dir() / "anthropic-codebase")
    started = time.perf_counter()
    report = index_documents(to_documents(dataset, "anthropic-codebase"), settings, rebuild=True)
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
        "seconds": round(time.perf_counter() - started, 1),
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


def _same_as_service(body: dict[str, object]) -> None:
    """The offline fusion at weight 1 must rank exactly as the search service's hybrid."""
    for q in body["queries"]:  # type: ignore[attr-defined]
        fused = distribution_based_score_fusion({"dense": q["dense"], "bm25": q["bm25"]})
        if [f.key for f in fused[: len(q["hybrid"])]] != q["hybrid"]:
            raise SystemExit(f"{body['name']}: offline DBSF differs from the service's hybrid")


def mean_rows(rows: Sequence[list[float]]) -> list[float]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floors", default="0,0.25,0.4")
    parser.add_argument("--prefixes", default="0.0625,0.125,0.25")
    parser.add_argument("--bm25", default="1.2:0.75")
    parser.add_argument("--weights", default="0.8,1,1.2,1.5,2")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ctxr-code-cv"))
    parser.add_argument("--default", default="0.25,0.125,1.2,0.75,1", help="the untuned row")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f}; work {args.work}", flush=True)
    bm25 = [tuple(float(v) for v in pair.split(":")) for pair in args.bm25.split(",")]
    table: dict[tuple[float, ...], list[list[float]]] = {}
    for floor in _floats(args.floors):
        for prefix in _floats(args.prefixes):
            for k1, b in bm25:
                body = build_rankings(args.work, floor, prefix, k1, b)
                _same_as_service(body)
                check = recall_at(body, 1.0)
                for weight in _floats(args.weights):
                    rows = check if weight == 1.0 else recall_at(body, weight)
                    table[(floor, prefix, k1, b, weight)] = rows
                sizes = body["sizes"]["code"]  # type: ignore[index]
                print(
                    f"{body['name']}: {body['chunks']} chunks, median {sizes['median']}, "
                    f"{sizes['share_under_40']:.1%} under 40; weight 1: "
                    + " / ".join(f"{x:.2f}" for x in mean_rows(check)),
                    flush=True,
                )
    picks, held = cross_validate(table, args.folds, args.seed)
    default = tuple(_floats(args.default))
    everything = max(table, key=lambda c: statistics.fmean(sum(r) for r in table[c]))
    print("\ncombination = (floor share, prefix share, k1, b, BM25 weight)")
    print(f"folds' picks: {picks}")
    print("held-out folds (Pass@5/10/20): " + " / ".join(f"{x:.2f}" for x in mean_rows(held)))
    if default in table:
        print(f"untuned {default}: " + " / ".join(f"{x:.2f}" for x in mean_rows(table[default])))
    print(
        f"best on all queries {everything} (optimistic): "
        + " / ".join(f"{x:.2f}" for x in mean_rows(table[everything]))
    )


if __name__ == "__main__":
    main()
