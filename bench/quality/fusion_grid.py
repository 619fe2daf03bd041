"""Fusion constants across judged sets: the weights DBSF gives BM25 and the whole-document
ranking, fixed or chosen from the query's shape or its rankings, scored without re-embedding
anything.

Each query's rankings are retrieved once from an index `ctxr eval` built (dense, chunk BM25
and, on prose, the whole-document BM25, at the eval's depth) and kept in ``--work``; every
variant then fuses them offline with ctxr's own code (`ctxr.retrieve.fusion`,
`ctxr.retrieve.documents`: what `SearchService.search` runs, weights aside) and scores them as
`ctxr eval` does: BEIR sets by distinct documents (a query's own document ignored), the code
set by the span-overlap rule of ``--chunks ours``. The default variant must reproduce
`ctxr eval`'s figure; the script says so when it does not.

Constants are chosen on a tuning split and reported on test; ``--folds`` adds a
cross-validated figure (ArguAna, which has no train split; the code set).

    ctxr eval beir --data ../shared/data/nfcorpus --split dev --index-dir /tmp/q-evalidx \\
        --modes hybrid:none
    python -m bench.quality.fusion_grid --set beir --data ../shared/data/nfcorpus \\
        --split dev --index /tmp/q-evalidx/nfcorpus-ours200-none-bm25-1.2-0.75-doc1024

Figures: docs/explanation/evaluation.md ("Fusion constants across the sets").
"""

from __future__ import annotations

import functools
import json
import pickle
import random
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.eval import metrics
from ctxr.eval.datasets import EvalDataset, EvalQuery
from ctxr.eval.judging import document_ranks, judged_ranks
from ctxr.eval.runner import eval_cache_dir, load_dataset
from ctxr.index import components
from ctxr.index.store.base import ScoredRecord
from ctxr.retrieve.documents import land_documents
from ctxr.retrieve.fusion import DOCUMENT_RANKING, Fused, distribution_based_score_fusion
from ctxr.retrieve.records import hit_from_fused
from ctxr.retrieve.service import SearchService
from ctxr.types import Hit

Rankings = dict[str, list[ScoredRecord]]


@dataclass(frozen=True)
class Variant:
    """DBSF weights: BM25 chunks `bm25`, whole documents `doc`; a query of more than `long`
    words gives BM25 (chunks and documents) `long_scale` of its weight; a query naming an
    identifier (`IDENTIFIER`) gives it `ident_scale`."""

    bm25: float = 1.0
    doc: float = 0.5
    long: int = 64
    long_scale: float = 1.0
    ident_scale: float = 1.0
    window: int = 50  # the search's candidates: DBSF's statistics, and a shallow search's depth
    # Document support: each fused chunk gains `support` x the fused scores of the other chunks
    # of its document among the fused results (a document that answers as a whole lifts its
    # chunks); 0 is the search as it is.
    support: float = 0.0
    # Title and path as a field: each fused chunk gains `title` x the share of the query's BM25
    # terms found in its document's title and source path; 0 is the search as it is.
    title: float = 0.0
    # BM25's coverage: a query whose best BM25 chunk holds less than `cover` of the query's
    # distinct terms gives BM25 (chunks and documents) `cover_scale` of its weight (a partial
    # match is weak evidence); 0 is the search as it is.
    cover: float = 0.0
    cover_scale: float = 1.0
    # The dense retriever's confidence: a query whose best dense score is `sure` or more gives
    # BM25 (chunks and documents) `sure_scale` of its weight; 0 is the search as it is.
    sure: float = 0.0
    sure_scale: float = 1.0
    # ... unless BM25 is sure too: its top score `unless` standard deviations or more above its
    # candidates' mean (a rare name matched); 0 is no exception.
    unless: float = 0.0

    def name(self) -> str:
        tail = f" long>{self.long}x{self.long_scale:g}" if self.long_scale != 1.0 else ""
        tail += f" ident x{self.ident_scale:g}" if self.ident_scale != 1.0 else ""
        tail += f" cand {self.window}" if self.window != 50 else ""
        tail += f" support {self.support:g}" if self.support else ""
        tail += f" title {self.title:g}" if self.title else ""
        tail += f" cover<{self.cover:g}x{self.cover_scale:g}" if self.cover else ""
        tail += f" dense>={self.sure:g}x{self.sure_scale:g}" if self.sure else ""
        tail += f" unless bm25 margin>={self.unless:g}" if self.sure and self.unless else ""
        return f"bm25 {self.bm25:g} doc {self.doc:g}{tail}"

    def weights(
        self, query: str, coverage: float = 1.0, dense_top: float = 0.0, bm25_margin: float = 0.0
    ) -> dict[str, float]:
        scale = self.long_scale if len(WORD.findall(query)) > self.long else 1.0
        scale *= self.ident_scale if IDENTIFIER.search(query) else 1.0
        scale *= self.cover_scale if coverage < self.cover else 1.0
        bm25_sure = bool(self.unless) and bm25_margin >= self.unless
        scale *= self.sure_scale if self.sure and dense_top >= self.sure and not bm25_sure else 1.0
        return {"dense": 1.0, "bm25": self.bm25 * scale, DOCUMENT_RANKING: self.doc * scale}


WORD = re.compile(r"\w+")
# snake_case, camelCase, PascalCase with an inner capital, a call, or anything in backticks
# (a dotted name is left out: "e.g.", "U.S." and "3.5" are dotted too).
IDENTIFIER = re.compile(r"`[^`]+`|\b\w+_\w+|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*|\w\(")


def fuse(
    rankings: Rankings,
    weights: Mapping[str, float],
    k: int,
    window: int,
    support: float = 0.0,
    title: tuple[float, Callable[[str], float]] | None = None,
) -> list[str]:
    """`fuse_records`' order (DBSF, documents landed on their best chunk) with any weights,
    document support (`Variant.support`) and a title field (`Variant.title`: its weight and
    the share of the query's terms a title-and-path string holds)."""
    records = {r.point_id: r for ranking in rankings.values() for r in ranking}
    keyed = {n: [(r.point_id, r.score) for r in rs] for n, rs in rankings.items()
             if n != DOCUMENT_RANKING}  # fmt: skip
    chunk_weights = {n: weights[n] for n in keyed}
    if DOCUMENT_RANKING in rankings:
        found = [(r.point_id, r.payload["doc_id"], r.score) for r in rankings[DOCUMENT_RANKING]]
        chunks = distribution_based_score_fusion(keyed, chunk_weights, window)
        order = [(item.key, records[item.key].payload["doc_id"]) for item in chunks]
        keyed[DOCUMENT_RANKING] = land_documents(found, order, "best")
    fused = distribution_based_score_fusion(keyed, {n: weights[n] for n in keyed}, window)
    if title is not None:
        weight, share = title
        fused = sorted(
            (
                Fused(item.key, item.score + weight * share(_field(records[item.key])))
                for item in fused
            ),
            key=lambda item: -item.score,
        )
    if support:
        totals: dict[str, float] = {}
        for item in fused:
            doc = records[item.key].payload["doc_id"]
            totals[doc] = totals.get(doc, 0.0) + item.score
        lifted = {
            item.key: item.score
            + support * (totals[records[item.key].payload["doc_id"]] - item.score)
            for item in fused
        }
        order = sorted(range(len(fused)), key=lambda i: (-lifted[fused[i].key], i))
        return [fused[i].key for i in order[:k]]
    return [item.key for item in fused[:k]]


def _field(record: ScoredRecord) -> str:
    payload = record.payload
    return f"{payload.get('title') or ''} {payload.get('source') or ''}"


def retrieved(
    work: Path, index: Path, dataset: EvalDataset, split: str, depth: int, context: str
) -> list[Rankings]:
    """Each query's rankings, from ``work`` when an earlier run kept them."""
    path = work / f"{index.name}-{split}-{depth}.pickle"
    if path.is_file():
        with path.open("rb") as fh:
            kept: list[Rankings] = pickle.load(fh)
        return kept
    settings = load_settings(
        index_dir=index, context=context, cache_dir=eval_cache_dir(load_settings())
    )
    embedder = components.make_embedder(settings, cached=True)
    with SearchService(settings, embedder=embedder) as service:
        got = service.retrieve([q.text for q in dataset.queries], "hybrid", depth)
    work.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        pickle.dump(got, fh)
    return got


def per_query(
    kind: str, dataset: EvalDataset, rankings: Sequence[Rankings], variant: Variant,
    k: int, ks: Sequence[int], metric: Callable[[dict[str, float]], float],
    terms: Callable[[str], frozenset[str]],
) -> list[float]:  # fmt: skip
    """The metric of every query under `variant`; a query whose weights and window some
    variant already fused is not fused again (`_MEMO`). `terms` is a text's BM25 terms, by
    the index's analyzer (the title field's)."""
    mapper = judged_ranks(dataset, "beir" if kind == "beir" else "anthropic-codebase", "ours", {})
    scores = []
    for i, (query, ranked) in enumerate(zip(dataset.queries, rankings, strict=True)):
        # Analysing the best BM25 chunk only for the variants that read its coverage.
        coverage = (
            _coverage(terms(query.text), ranked.get("bm25", []), terms) if variant.cover else 1.0
        )
        # BM25's margin, likewise only for the variants that read it.
        bm25 = ranked.get("bm25", [])[: variant.window]
        margin = _margin([r.score for r in bm25]) if variant.unless else 0.0
        # Only the rankings the query has (the code set has no document ranking).
        weights = variant.weights(query.text, coverage, _dense_top(query, ranked), margin)
        weights = {n: w for n, w in weights.items() if n in ranked}
        memo = (dataset.name, i, tuple(sorted(weights.items())), variant.window, variant.support,
                variant.title)  # fmt: skip
        if memo in _MEMO:
            scores.append(_MEMO[memo])
            continue
        records = {r.point_id: r for rs in ranked.values() for r in rs}
        if k <= variant.window:  # a search for k <= candidates fetches the candidates only
            ranked = {n: rs[: variant.window] for n, rs in ranked.items()}
        title = None
        if variant.title:
            asked = terms(query.text)

            def share(text: str, asked: frozenset[str] = asked) -> float:
                return len(asked & terms(text)) / len(asked) if asked else 0.0

            title = (variant.title, share)
        order = fuse(ranked, weights, k, variant.window, variant.support, title)
        if kind == "beir":
            found = document_ranks([_hit(records[c]) for c in order], query.ignore)
        else:
            found = mapper(query.query_id, [_hit(records[c], rank) for rank, c in
                                            enumerate(order, start=1)])  # fmt: skip
        scores.append(metric(metrics.score_ranks(found, query.qrels, ks)))
        _MEMO[memo] = scores[-1]
    return scores


def _dense_top(query: EvalQuery, ranked: Rankings) -> float:
    """The best dense score among the documents the query may find (ArguAna's queries are
    corpus documents themselves, found first and ignored: as if the corpus lacked them)."""
    dense = ranked.get("dense", [])
    return next((r.score for r in dense if r.payload["doc_id"] not in query.ignore), 0.0)


def _margin(scores: Sequence[float]) -> float:
    """How far a ranking's top score stands above its candidates' mean, in standard
    deviations (0 for fewer than two)."""
    if len(scores) < 2:
        return 0.0
    return (scores[0] - statistics.fmean(scores)) / (statistics.pstdev(scores) or 1.0)


def _agreement(ranked: Rankings) -> float:
    """The share of the dense top 10's documents in BM25's top 10."""
    dense = {r.payload["doc_id"] for r in ranked.get("dense", [])[:10]}
    bm25 = {r.payload["doc_id"] for r in ranked.get("bm25", [])[:10]}
    return len(dense & bm25) / 10


# What a search sees of a query before it fuses: its candidates' scores, and their words.
FEATURES: dict[str, Callable[[EvalQuery, Rankings, Callable[[str], frozenset[str]]], float]] = {
    "dense top score": lambda q, r, t: _dense_top(q, r),
    "dense margin": lambda q, r, t: _margin([x.score for x in r.get("dense", [])[:50]]),
    "BM25 margin": lambda q, r, t: _margin([x.score for x in r.get("bm25", [])[:50]]),
    "top-10 agreement": lambda q, r, t: _agreement(r),
    "BM25 coverage": lambda q, r, t: _coverage(t(q.text), r.get("bm25", []), t),
    "query terms": lambda q, r, t: float(len(t(q.text))),
}


def fifths(
    rankings: Sequence[Rankings], scores: Sequence[float], base: Sequence[float],
    dataset: EvalDataset, terms: Callable[[str], frozenset[str]],
) -> list[str]:  # fmt: skip
    """Per feature, the queries sorted by it and cut in fifths: each fifth's share of the
    mean gain of `scores` over `base` (the five sum to the whole gain)."""
    lines = []
    n = len(scores)
    for name, feature in FEATURES.items():
        values = [feature(q, r, terms) for q, r in zip(dataset.queries, rankings, strict=True)]
        order = sorted(range(n), key=lambda i: values[i])
        parts = []
        for f in range(5):
            part = order[f * n // 5 : (f + 1) * n // 5]
            gain = sum(scores[i] - base[i] for i in part) / n
            parts.append(f"{values[part[0]]:.2f}-{values[part[-1]]:.2f}: {gain:+.4f}")
        lines.append(f"  {name}: " + " | ".join(parts))
    return lines


def _coverage(
    asked: frozenset[str], bm25: Sequence[ScoredRecord], terms: Callable[[str], frozenset[str]]
) -> float:
    """The share of the query's distinct terms that its best BM25 chunk holds (1 when there
    is no query term or no BM25 hit: nothing to scale)."""
    if not asked or not bm25:
        return 1.0
    payload = bm25[0].payload
    text = f"{payload.get('context') or ''} {payload.get('prefix') or ''} {payload['text']}"
    return len(asked & terms(text)) / len(asked)


_MEMO: dict[tuple[object, ...], float] = {}
TIE = 1e-9  # two queries' metrics closer than this are equal


def _hit(record: ScoredRecord, rank: int = 0) -> Hit:
    return hit_from_fused(rank, Fused(record.point_id, record.score), record.payload)


def _set(variant: Variant, axis: str, value: float) -> Variant:
    fields: dict[str, float | int] = {axis: int(value) if axis in ("long", "window") else value}
    return replace(variant, **fields)  # type: ignore[arg-type]  # axes are named on the CLI


def grid(spec: str) -> list[Variant]:
    """``bm25=0.8,1;doc=0.25,0.5;long=40;long_scale=0.5,1`` -> every combination."""
    axes: dict[str, list[float]] = {}
    for part in spec.split(";"):
        axis, numbers = part.split("=")
        axes[axis.strip()] = [float(x) for x in numbers.split(",")]
    variants = [Variant()]
    for axis, values in axes.items():
        variants = [_set(v, axis, x) for v in variants for x in values]
    return list(dict.fromkeys([Variant(), *variants]))


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--set", choices=("beir", "code"), required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--index", type=Path, required=True, help="an index `ctxr eval` built")
    parser.add_argument("--grid", default="bm25=0.8,1,1.25;doc=0.25,0.5,1")
    parser.add_argument("--context", default="none", help="the index's context (code: outline)")
    parser.add_argument("--folds", type=int, default=0, help="cross-validate over N folds")
    parser.add_argument("--work", type=Path, default=Path("/tmp/q-evalidx/rankings"))
    parser.add_argument("--json", type=Path, help="write every variant's per-query scores here")
    parser.add_argument(
        "--fifths",
        action="store_true",
        help="each variant's gain over the default in each fifth of the queries, sorted by "
        "features a search could see (`FEATURES`)",
    )
    args = parser.parse_args(argv)
    kind = args.set
    dataset = load_dataset(
        "beir" if kind == "beir" else "anthropic-codebase", args.data, args.split
    )
    # The eval's depth: BEIR 100 documents x 3 chunks; the code set's 20 hits, fetched at the
    # candidates (max(candidates, k)), so kept to 100 for candidates up to 100.
    depth, k, ks = (300, 300, (10, 100)) if kind == "beir" else (100, 20, (5, 10, 20))
    if kind == "beir":

        def metric(s: dict[str, float]) -> float:
            return s["ndcg@10"]
    else:

        def metric(s: dict[str, float]) -> float:
            return (s["pass@5"] + s["pass@10"] + s["pass@20"]) / 3

    say(load_line(f"at start; {dataset.name} {args.split}, {len(dataset.queries)} queries"))
    rankings = retrieved(args.work, args.index, dataset, args.split, depth, args.context)
    analyzer = components.make_analyzer(load_settings(index_dir=args.index))

    @functools.cache  # a document's title and path, analysed once for every query and variant
    def terms(text: str) -> frozenset[str]:
        return frozenset(analyzer.terms(text))

    table = {
        v: per_query(kind, dataset, rankings, v, k, ks, metric, terms) for v in grid(args.grid)
    }
    base = statistics.fmean(table[Variant()])
    print(f"| variant | {dataset.name} {args.split} | vs default | better / worse |")
    print("|---|---|---|---|")
    for v, scores in sorted(table.items(), key=lambda kv: -statistics.fmean(kv[1])):
        # Beyond float noise: a metric summed over a set of documents differs in its last bits
        # from one process to the next (string hashing orders the set).
        up = sum(a > b + TIE for a, b in zip(scores, table[Variant()], strict=True))
        down = sum(a < b - TIE for a, b in zip(scores, table[Variant()], strict=True))
        mean = statistics.fmean(scores)
        print(f"| {v.name()} | {mean:.4f} | {mean - base:+.4f} | {up} / {down} |")
    if args.folds:
        order = list(range(len(dataset.queries)))
        random.Random(0).shuffle(order)
        held: list[float] = []
        picks = []
        for f in range(args.folds):
            test = set(order[f :: args.folds])
            pick = max(table, key=lambda v: statistics.fmean(
                s for i, s in enumerate(table[v]) if i not in test))  # fmt: skip
            picks.append(pick.name())
            held += [s for i, s in enumerate(table[pick]) if i in test]
        print(f"{args.folds}-fold picks: {picks}; held out {statistics.fmean(held):.4f} "
              f"(default {base:.4f})")  # fmt: skip
    if args.fifths:
        for v in table:
            if v != Variant():
                say(f"fifths of the queries by each feature, {v.name()} against the default:")
                for line in fifths(rankings, table[v], table[Variant()], dataset, terms):
                    say(line)
    if args.json:
        args.json.write_text(json.dumps({v.name(): s for v, s in table.items()}))
    say(load_line("at end"))


if __name__ == "__main__":
    main()
