"""Rank fusion, pure: several retrievers' ranked lists in, one fused ranking out.

Two families, both parameter-light:

- Reciprocal rank fusion (Cormack et al., 2009) scores an item sum(w_r / (k + rank_r)) over
  the retrievers that returned it. It ignores raw scores, which is why it fuses cosine
  similarities and BM25 sums that live on unrelated scales. Anthropic's reference fusion is
  this with k = 0 and weights 0.8 / 0.2.
- Distribution-based score fusion (DBSF, as in Qdrant) normalises each retriever's scores by
  their own spread (mean +- 3 standard deviations, clipped to [0, 1]) and sums them, so a
  retriever that is confident about one item (a score far above the rest) counts for more
  than one whose top scores are all alike. The spread is taken over each ranking's first
  `window` scores (the search's `candidates`), not over however deep the search fetched: a
  deep list's long tail of weak scores drags the mean down and widens the spread, by amounts
  that differ between cosine and BM25, so asking for more hits would shift the retrievers'
  balance and reorder the first ones (SciFact train: docs/explanation/evaluation.md).

DBSF gives BM25 less weight for a query the dense retriever is sure of: when the dense
ranking's top score is at least `FusionParams.confident_dense` (a cosine of one embedder:
`ctxr.retrieve.confidence`), both BM25 rankings count `confident_bm25` of their weight: a dense
match that close is strong evidence on its own. Chosen on the tuning splits of five judged sets,
where it lifts web questions over code and costs none of the others more than noise
(docs/explanation/evaluation.md, "Less BM25 when the dense retriever is sure").

Each fused item keeps every retriever's score and rank, so a caller can show why a hit came
back.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ctxr.config import DEFAULT_FUSION_WEIGHTS
from ctxr.types import RetrieverScore

K = TypeVar("K", bound=Hashable)
DENSE_RANKING = "dense"
CHUNK_BM25_RANKING = "bm25"
DOCUMENT_RANKING = "bm25_doc"  # the whole-document BM25 ranking (`ctxr.retrieve.documents`)


@dataclass(frozen=True, slots=True)
class Fused(Generic[K]):
    key: K
    score: float
    by_retriever: Mapping[str, RetrieverScore] = field(default_factory=dict)


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[tuple[K, float]]],
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Fuse best-first `(key, score)` lists by RRF; ties break by best single rank, then key order
    of first appearance, so the result is deterministic."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    totals: dict[K, float] = {}
    seen: dict[K, dict[str, RetrieverScore]] = {}
    for name, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for position, (key, score) in enumerate(ranking, start=1):
            per_key = seen.setdefault(key, {})
            if name in per_key:
                continue  # a retriever listing one key twice counts its best rank only
            per_key[name] = RetrieverScore(score=score, rank=position)
            totals[key] = totals.get(key, 0.0) + weight / (k + position)
    order = {key: i for i, key in enumerate(seen)}
    ranked = sorted(
        totals,
        key=lambda key: (-totals[key], min(s.rank for s in seen[key].values()), order[key]),
    )
    return [Fused(key, totals[key], seen[key]) for key in ranked]


def single_ranking(name: str, ranking: Sequence[tuple[K, float]]) -> list[Fused[K]]:
    """One retriever's list in the fused shape, for dense-only and BM25-only searches."""
    out: list[Fused[K]] = []
    seen: set[K] = set()
    for key, score in ranking:
        if key not in seen:
            seen.add(key)
            out.append(Fused(key, score, {name: RetrieverScore(score, len(out) + 1)}))
    return out


def distribution_based_score_fusion(
    rankings: Mapping[str, Sequence[tuple[K, float]]],
    weights: Mapping[str, float] | None = None,
    window: int | None = None,
) -> list[Fused[K]]:
    """Fuse best-first `(key, score)` lists by DBSF; deterministic tie-breaks as in RRF.

    `weights` scale each retriever's normalised scores (a retriever left out counts 1).
    `window`: each ranking's mean and spread come from its first `window` items (all when
    None); items below them still count, normalised by the same statistics."""
    if window is not None and window < 1:
        raise ValueError(f"DBSF window must be >= 1, got {window}")
    totals: dict[K, float] = {}
    seen: dict[K, dict[str, RetrieverScore]] = {}
    for name, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        firsts = _first_occurrences(ranking)
        if not firsts:
            continue
        scores = [score for _, score in firsts[:window]]
        mean = sum(scores) / len(scores)
        std = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
        low, high = mean - 3 * std, mean + 3 * std
        for position, (key, score) in enumerate(firsts, start=1):
            # One score, or all equal: no spread to normalise by, every item counts fully.
            normalised = 1.0 if high <= low else min(max((score - low) / (high - low), 0.0), 1.0)
            seen.setdefault(key, {})[name] = RetrieverScore(score=score, rank=position)
            totals[key] = totals.get(key, 0.0) + weight * normalised
    order = {key: i for i, key in enumerate(seen)}
    ranked = sorted(
        totals,
        key=lambda key: (-totals[key], min(s.rank for s in seen[key].values()), order[key]),
    )
    return [Fused(key, totals[key], seen[key]) for key in ranked]


def _first_occurrences(ranking: Sequence[tuple[K, float]]) -> list[tuple[K, float]]:
    seen: set[K] = set()
    out = []
    for key, score in ranking:
        if key not in seen:
            seen.add(key)
            out.append((key, score))
    return out


@dataclass(frozen=True, slots=True)
class FusionParams:
    """The constants of every method, read from the settings once per search service."""

    rrf_k: int = 60
    weighted_k: int = 0
    # A retriever left out of the weights counts for nothing, not for 1.
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_FUSION_WEIGHTS))
    # DBSF's and RRF's weight of the whole-document BM25 ranking (the others count 1).
    document_weight: float = 0.5
    # DBSF's normalisation window: the search's candidates per retriever (None: whole lists).
    window: int | None = None
    # DBSF: a dense top score at which both BM25 rankings count `confident_bm25` of their
    # weight (None: never; `ctxr.retrieve.confidence` sets it per embedder).
    confident_dense: float | None = None
    confident_bm25: float = 1.0


Rankings = Mapping[str, Sequence[tuple[K, float]]]
Fuser = Callable[[Rankings[K], FusionParams], list[Fused[K]]]


def _rrf(rankings: Rankings[K], params: FusionParams) -> list[Fused[K]]:
    return reciprocal_rank_fusion(rankings, k=params.rrf_k, weights=_document_weight(params))


def _weighted(rankings: Rankings[K], params: FusionParams) -> list[Fused[K]]:
    weights = {name: params.weights.get(name, 0.0) for name in rankings}
    return reciprocal_rank_fusion(rankings, k=params.weighted_k, weights=weights)


def _dbsf(rankings: Rankings[K], params: FusionParams) -> list[Fused[K]]:
    weights = _document_weight(params)
    if _dense_is_sure(rankings, params):
        bm25 = {CHUNK_BM25_RANKING: 1.0, DOCUMENT_RANKING: params.document_weight}
        weights = {name: weight * params.confident_bm25 for name, weight in bm25.items()}
    return distribution_based_score_fusion(rankings, weights=weights, window=params.window)


def _dense_is_sure(rankings: Rankings[K], params: FusionParams) -> bool:
    dense = rankings.get(DENSE_RANKING)
    sure = params.confident_dense
    return sure is not None and dense is not None and len(dense) > 0 and dense[0][1] >= sure


def _document_weight(params: FusionParams) -> dict[str, float] | None:
    return None if params.document_weight == 1.0 else {DOCUMENT_RANKING: params.document_weight}


# One entry per method named in `ctxr.config.FUSIONS` (a test checks they agree).
FUSERS: Mapping[str, Fuser[Any]] = {"dbsf": _dbsf, "rrf": _rrf, "weighted": _weighted}


def fuse(method: str, rankings: Rankings[K], params: FusionParams) -> list[Fused[K]]:
    """Fuse by `method`; one ranking alone is passed through with its own ranks."""
    if len(rankings) == 1:
        [(name, ranking)] = rankings.items()
        return single_ranking(name, ranking)
    fuser: Fuser[K] = FUSERS[method]
    return fuser(rankings, params)
