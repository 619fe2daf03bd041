"""Rank fusion, pure: several retrievers' ranked lists in, one fused ranking out.

Reciprocal rank fusion (Cormack et al., 2009) scores an item sum(w_r / (k + rank_r)) over the
retrievers that returned it. It ignores raw scores, which is why it fuses cosine similarities
and BM25 sums that live on unrelated scales. Each fused item keeps every retriever's score and
rank, so a caller can show why a hit came back.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ctxr.types import RetrieverScore

K = TypeVar("K", bound=Hashable)


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
    if k < 1:
        raise ValueError(f"RRF k must be >= 1, got {k}")
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
