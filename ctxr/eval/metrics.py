"""Retrieval metrics as pure functions over ids.

Two families are kept apart on purpose, because published numbers come from both:

- ``pass_at_k`` is the metric of Anthropic's contextual-retrieval guide: per query, the share
  of its golden chunks that appear in the top k. Every golden id counts, whatever its grade.
- ``recall_at_k``, ``mrr_at_k`` and ``ndcg_at_k`` follow BEIR, which computes them with
  pytrec_eval: only judgments with grade > 0 are relevant, nDCG's gain is the grade itself
  (linear, not 2**grade - 1) and its discount is log2(rank + 1).

A retrieved list is read position by position: an id that appears twice in the top k occupies
both positions but is found (and gains) only once, so a retriever cannot score by repetition.
Ids are compared as strings, never by text: in the anthropic-codebase set several chunks share
identical text and only the golden id counts.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

Relevant = Mapping[str, int] | Collection[str]

DEFAULT_KS: tuple[int, ...] = (5, 10, 20)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def _relevant_ids(relevant: Relevant) -> set[str]:
    """The ids judged relevant: grade > 0 for graded qrels, every member for a plain set."""
    if isinstance(relevant, Mapping):
        return {doc_id for doc_id, grade in relevant.items() if grade > 0}
    return set(relevant)


def _first_positions(retrieved: Sequence[str], k: int) -> dict[str, int]:
    """Each distinct id in the top k with its first 1-based rank."""
    first: dict[str, int] = {}
    for rank, doc_id in enumerate(retrieved[:k], start=1):
        first.setdefault(doc_id, rank)
    return first


def pass_at_k(retrieved: Sequence[str], golden: Collection[str], k: int) -> float:
    """Share of the golden ids found in the top k (Anthropic's "Pass@k"); 0.0 with no golden."""
    _check_k(k)
    wanted = set(golden)
    if not wanted:
        return 0.0
    return len(wanted & set(retrieved[:k])) / len(wanted)


def recall_at_k(retrieved: Sequence[str], relevant: Relevant, k: int) -> float:
    """BEIR recall: relevant ids in the top k over all relevant ids; 0.0 with none relevant."""
    _check_k(k)
    wanted = _relevant_ids(relevant)
    if not wanted:
        return 0.0
    return len(wanted & set(retrieved[:k])) / len(wanted)


def mrr_at_k(retrieved: Sequence[str], relevant: Relevant, k: int = 10) -> float:
    """Reciprocal of the rank of the first relevant id in the top k; 0.0 if there is none."""
    _check_k(k)
    wanted = _relevant_ids(relevant)
    for rank, doc_id in enumerate(retrieved[:k], start=1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(retrieved: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k as pytrec_eval's ``ndcg_cut`` computes it (BEIR's published numbers).

    DCG = sum over ranks r <= k of grade / log2(r + 1); the ideal DCG ranks the positive
    grades of ``qrels`` from highest to lowest. Grades <= 0 gain nothing.
    """
    _check_k(k)
    dcg = 0.0
    for doc_id, rank in _first_positions(retrieved, k).items():
        grade = qrels.get(doc_id, 0)
        if grade > 0:
            dcg += grade / math.log2(rank + 1)
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """The keys ``evaluate_run`` returns, in a stable order for tables."""
    names = [f"pass@{k}" for k in ks] + [f"recall@{k}" for k in ks]
    return [*names, "mrr@10", "ndcg@10"]


def score_query(
    retrieved: Sequence[str], qrels: Mapping[str, int], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """Every metric of ``metric_names(ks)`` for one query."""
    scores: dict[str, float] = {}
    for k in ks:
        scores[f"pass@{k}"] = pass_at_k(retrieved, qrels.keys(), k)
    for k in ks:
        scores[f"recall@{k}"] = recall_at_k(retrieved, qrels, k)
    scores["mrr@10"] = mrr_at_k(retrieved, qrels, 10)
    scores["ndcg@10"] = ndcg_at_k(retrieved, qrels, 10)
    return scores


@dataclass(frozen=True)
class MetricReport:
    """Macro-averaged scores plus the per-query scores they came from.

    Per-query scores are kept so that an ablation can say which queries a change won or lost,
    not only how the mean moved. Scores are fractions in [0, 1]; multiply by 100 to compare
    with the guide's percentages.
    """

    scores: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def num_queries(self) -> int:
        return len(self.per_query)

    def format(self) -> str:
        """One line per metric, as percentages, for a terminal summary."""
        width = max((len(name) for name in self.scores), default=0)
        lines = [f"{name:<{width}}  {100 * value:6.2f}" for name, value in self.scores.items()]
        return "\n".join([f"queries: {self.num_queries}", *lines])


def report_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int] = DEFAULT_KS,
) -> MetricReport:
    """Score a run (query id -> ranked ids) against qrels (query id -> id -> grade).

    Queries are those of ``qrels`` that have at least one judgment, as in pytrec_eval; a query
    the run does not answer scores 0 rather than being dropped, so a retriever that fails on
    hard queries cannot raise its average. Ids in ``run`` but not in ``qrels`` are ignored.
    """
    for k in ks:
        _check_k(k)
    per_query = {
        query_id: score_query(run.get(query_id, ()), judged, ks)
        for query_id, judged in qrels.items()
        if judged
    }
    names = metric_names(ks)
    n = len(per_query)
    scores = {name: (sum(q[name] for q in per_query.values()) / n if n else 0.0) for name in names}
    return MetricReport(scores=scores, per_query=per_query)


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """Macro averages over the queries of ``qrels``: "pass@k" and "recall@k" for each k,
    "mrr@10" and "ndcg@10". See ``report_run`` for the rules."""
    return report_run(run, qrels, ks).scores


def first_ranks(retrieved: Sequence[str], depth: int | None = None) -> dict[str, int]:
    """Each distinct id in ``retrieved`` (its first ``depth`` positions) with its first rank."""
    return _first_positions(retrieved, len(retrieved) if depth is None else depth)


def score_ranks(
    found: Mapping[str, int], qrels: Mapping[str, int], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """``score_query`` from the 1-based rank at which each id was first found.

    Every metric here depends only on those ranks, so a harness that decides *when* a judged
    id counts as found (a retrieved span overlapping a golden one, several judged ids matched
    by one hit) scores with this instead of inventing a retrieved list. For any list,
    ``score_ranks(first_ranks(retrieved), q, ks) == score_query(retrieved, q, ks)``.
    """

    def within(ids: Collection[str], k: int) -> int:
        return sum(1 for i in ids if 0 < found.get(i, 0) <= k)

    golden = set(qrels)
    relevant = _relevant_ids(qrels)
    scores: dict[str, float] = {}
    for k in ks:
        _check_k(k)
        scores[f"pass@{k}"] = within(golden, k) / len(golden) if golden else 0.0
    for k in ks:
        scores[f"recall@{k}"] = within(relevant, k) / len(relevant) if relevant else 0.0
    top = [found[i] for i in relevant if 0 < found.get(i, 0) <= 10]
    scores["mrr@10"] = 1.0 / min(top) if top else 0.0
    dcg = sum(qrels[i] / math.log2(found[i] + 1) for i in relevant if 0 < found.get(i, 0) <= 10)
    ideal = sorted((qrels[i] for i in relevant), reverse=True)[:10]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    scores["ndcg@10"] = dcg / idcg if idcg > 0 else 0.0
    return scores


def report_ranks(
    found: Mapping[str, Mapping[str, int]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int] = DEFAULT_KS,
) -> MetricReport:
    """``report_run`` for runs given as query id -> judged id -> first rank found."""
    per_query = {
        query_id: score_ranks(found.get(query_id, {}), judged, ks)
        for query_id, judged in qrels.items()
        if judged
    }
    n = len(per_query)
    scores = {
        name: (sum(q[name] for q in per_query.values()) / n if n else 0.0)
        for name in metric_names(ks)
    }
    return MetricReport(scores=scores, per_query=per_query)


def recall_curve(
    found: Mapping[str, Mapping[str, int]],
    qrels: Mapping[str, Mapping[str, int]],
    max_k: int,
) -> list[float]:
    """Macro recall at k = 1..max_k (BEIR's recall: grade > 0), for plotting recall against k."""
    _check_k(max_k)
    totals = [0.0] * max_k
    n = 0
    for query_id, judged in qrels.items():
        relevant = _relevant_ids(judged)
        if not judged:
            continue
        n += 1
        if not relevant:
            continue
        ranks = found.get(query_id, {})
        for doc_id in relevant:
            rank = ranks.get(doc_id, 0)
            if 0 < rank <= max_k:
                for k in range(rank, max_k + 1):
                    totals[k - 1] += 1.0 / len(relevant)
    return [t / n if n else 0.0 for t in totals]
