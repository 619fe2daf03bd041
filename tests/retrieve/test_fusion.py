"""Reciprocal rank fusion on hand-computed lists: sum of w / (k + rank) over retrievers."""

from __future__ import annotations

import pytest

from ctxr.retrieve.fusion import (
    DOCUMENT_RANKING,
    Fused,
    FusionParams,
    distribution_based_score_fusion,
    fuse,
    reciprocal_rank_fusion,
    single_ranking,
)
from ctxr.types import RetrieverScore


def _scores(fused: list[Fused[str]]) -> dict[str, float]:
    return {f.key: f.score for f in fused}


def test_rrf_hand_computed() -> None:
    rankings = {
        "dense": [("a", 0.9), ("b", 0.8), ("c", 0.7)],
        "bm25": [("c", 12.0), ("a", 7.5), ("d", 1.0)],
    }
    fused = reciprocal_rank_fusion(rankings, k=60)
    expected = {
        "a": 1 / 61 + 1 / 62,
        "c": 1 / 63 + 1 / 61,
        "b": 1 / 62,
        "d": 1 / 63,
    }
    assert [f.key for f in fused] == ["a", "c", "b", "d"]
    assert _scores(fused) == pytest.approx(expected, abs=1e-15)
    a = fused[0]
    assert a.by_retriever == {
        "dense": RetrieverScore(score=0.9, rank=1),
        "bm25": RetrieverScore(score=7.5, rank=2),
    }
    assert fused[2].by_retriever == {"dense": RetrieverScore(0.8, 2)}  # b: dense only


def test_rrf_k_changes_scores() -> None:
    fused = reciprocal_rank_fusion({"x": [("a", 1.0), ("b", 0.5)]}, k=1)
    assert _scores(fused) == pytest.approx({"a": 1 / 2, "b": 1 / 3})
    # k = 0 is Anthropic's reference weighting, 1/rank.
    fused = reciprocal_rank_fusion({"x": [("a", 1.0), ("b", 0.5)]}, k=0)
    assert _scores(fused) == pytest.approx({"a": 1.0, "b": 1 / 2})
    with pytest.raises(ValueError, match="k must be >= 0"):
        reciprocal_rank_fusion({"x": [("a", 1.0)]}, k=-1)


def test_exact_ties_break_by_first_appearance() -> None:
    # u: ranks 1 and 3; v: ranks 3 and 1 -> equal sums and equal best rank; u appears first.
    tied = reciprocal_rank_fusion(
        {"a": [("u", 0), ("w", 0), ("v", 0)], "b": [("v", 0), ("w2", 0), ("u", 0)]}, k=60
    )
    assert tied[0].score == tied[1].score == 1 / 61 + 1 / 63
    assert [f.key for f in tied] == ["u", "v", "w", "w2"]


def test_equal_scores_break_by_best_single_rank() -> None:
    # With k=2: h is 2nd in two lists -> 1/4 + 1/4 = 0.5 (best rank 2); i is 1st in one list
    # weighted 1.5 -> 1.5/3 = 0.5 (best rank 1). h appears first, yet i wins the tie.
    fused = reciprocal_rank_fusion(
        {"b": [("x", 0), ("h", 0)], "c": [("y", 0), ("h", 0)], "a": [("i", 0)]},
        k=2,
        weights={"a": 1.5},
    )
    scores = _scores(fused)
    assert scores == {"h": 0.5, "i": 0.5, "x": 1 / 3, "y": 1 / 3}
    assert [f.key for f in fused] == ["i", "h", "x", "y"]


def test_duplicates_within_a_ranking_count_once_at_best_rank() -> None:
    fused = reciprocal_rank_fusion({"dense": [("a", 0.9), ("b", 0.8), ("a", 0.1)]}, k=60)
    assert _scores(fused) == pytest.approx({"a": 1 / 61, "b": 1 / 62})
    assert fused[0].by_retriever == {"dense": RetrieverScore(0.9, 1)}
    assert fused[1].by_retriever == {"dense": RetrieverScore(0.8, 2)}  # keeps its own position


def test_weights() -> None:
    rankings = {"dense": [("a", 0.9), ("b", 0.8)], "bm25": [("b", 3.0), ("a", 2.0)]}
    even = reciprocal_rank_fusion(rankings, k=60)
    assert even[0].score == even[1].score  # symmetric: a tie, broken by first appearance
    assert [f.key for f in even] == ["a", "b"]

    fused = reciprocal_rank_fusion(rankings, k=60, weights={"bm25": 2.0})  # dense defaults to 1
    assert _scores(fused) == pytest.approx({"a": 1 / 61 + 2 / 62, "b": 1 / 62 + 2 / 61})
    assert [f.key for f in fused] == ["b", "a"]

    muted = reciprocal_rank_fusion(rankings, k=60, weights={"dense": 0.0, "bm25": 1.0})
    assert [f.key for f in muted] == ["b", "a"]
    assert muted[0].by_retriever["dense"] == RetrieverScore(0.8, 2)  # still explained


def test_empty_inputs() -> None:
    assert reciprocal_rank_fusion({}) == []
    assert reciprocal_rank_fusion({"dense": [], "bm25": []}) == []
    assert single_ranking("bm25", []) == []


def test_single_ranking_keeps_order_scores_and_dedups() -> None:
    fused = single_ranking("bm25", [("a", 9.0), ("b", 4.0), ("a", 1.0), ("c", 0.5)])
    assert [(f.key, f.score) for f in fused] == [("a", 9.0), ("b", 4.0), ("c", 0.5)]
    assert [f.by_retriever for f in fused] == [
        {"bm25": RetrieverScore(9.0, 1)},
        {"bm25": RetrieverScore(4.0, 2)},
        {"bm25": RetrieverScore(0.5, 3)},  # ranks are renumbered after the duplicate
    ]


def test_dbsf_normalises_each_retriever_by_its_own_spread() -> None:
    # dense scores 0.9, 0.5, 0.1: mean 0.5, std sqrt(0.32/3); bounds mean +- 3 std.
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    bm25 = [("c", 10.0), ("b", 10.0)]  # no spread: every item counts fully (1.0)
    fused = distribution_based_score_fusion({"dense": dense, "bm25": bm25})
    std = (0.32 / 3) ** 0.5
    low, high = 0.5 - 3 * std, 0.5 + 3 * std

    def norm(x: float) -> float:
        return (x - low) / (high - low)

    expected = {"a": norm(0.9), "b": norm(0.5) + 1.0, "c": norm(0.1) + 1.0}
    assert _scores(fused) == pytest.approx(expected)
    assert [f.key for f in fused] == ["b", "c", "a"]
    assert fused[0].by_retriever["bm25"].rank == 2
    assert distribution_based_score_fusion({"dense": []}) == []


def test_dbsf_clips_outliers_and_counts_duplicates_once() -> None:
    scores = [("x", 100.0)] + [(f"n{i}", 1.0) for i in range(20)] + [("x", 50.0)]
    fused = distribution_based_score_fusion({"bm25": scores})
    assert fused[0].key == "x"
    assert fused[0].score == 1.0  # far beyond mean + 3 std: clipped to 1
    assert fused[0].by_retriever["bm25"] == RetrieverScore(100.0, 1)
    assert len(fused) == 21


def test_dbsf_weights_scale_each_retriever() -> None:
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    bm25 = [("c", 12.0), ("b", 4.0), ("a", 1.0)]
    plain = _scores(distribution_based_score_fusion({"dense": dense, "bm25": bm25}))
    heavy = distribution_based_score_fusion(
        {"dense": dense, "bm25": bm25}, weights={"dense": 1.0, "bm25": 2.0}
    )
    bm25_only = _scores(distribution_based_score_fusion({"bm25": bm25}))
    for key, score in _scores(heavy).items():
        assert score == pytest.approx(plain[key] + bm25_only[key])  # BM25's share counted twice
    assert heavy[0].key == "c"
    same = distribution_based_score_fusion({"dense": dense, "bm25": bm25}, weights={})
    assert _scores(same) == pytest.approx(plain)  # a retriever left out counts 1


def test_dbsf_window_takes_the_spread_from_the_first_items_only() -> None:
    # Window 2: dense's statistics come from 0.9 and 0.7 (mean 0.8, std 0.1, bounds 0.5 to 1.1);
    # "c" below the window still counts, normalised by them, and "d" falls under the low bound.
    dense = [("a", 0.9), ("b", 0.7), ("c", 0.6), ("d", 0.1)]
    fused = distribution_based_score_fusion({"dense": dense}, window=2)
    assert _scores(fused) == pytest.approx({"a": 0.4 / 0.6, "b": 0.2 / 0.6, "c": 0.1 / 0.6, "d": 0})
    whole = distribution_based_score_fusion({"dense": dense}, window=None)
    assert distribution_based_score_fusion({"dense": dense}, window=4) == whole
    assert _scores(whole) != pytest.approx(_scores(fused))
    with pytest.raises(ValueError, match="window"):
        distribution_based_score_fusion({"dense": dense}, window=0)


def test_dbsf_window_keeps_a_deeper_fetch_from_reordering_the_top() -> None:
    # Shallow, dense decides: "x" is far ahead there, "y" barely ahead in BM25. A long tail of
    # weak dense scores (a deep fetch) lowers the mean so far that x and y both clip to 1, and
    # BM25 flips them; with the window at the first three scores the shallow order stays.
    dense = [("x", 0.9), ("y", 0.5), ("z", 0.45)]
    bm25 = [("y", 10.0), ("x", 9.8), ("z", 5.0)]
    tail = [(f"t{i}", 0.05) for i in range(60)]
    shallow = distribution_based_score_fusion({"dense": dense, "bm25": bm25})
    deep = {"dense": dense + tail, "bm25": bm25}
    unwindowed = distribution_based_score_fusion(deep)
    windowed = distribution_based_score_fusion(deep, window=3)
    assert [f.key for f in windowed[:3]] == [f.key for f in shallow]
    assert [f.key for f in unwindowed[:3]] != [f.key for f in shallow]


def test_dbsf_gives_bm25_less_weight_when_the_dense_top_score_is_sure() -> None:
    dense = [("a", 0.72), ("b", 0.5), ("c", 0.1)]
    bm25 = [("c", 12.0), ("b", 4.0), ("a", 1.0)]
    documents = [("c", 3.0), ("a", 2.0)]
    rankings = {"dense": dense, "bm25": bm25, DOCUMENT_RANKING: documents}
    sure = FusionParams(confident_dense=0.7, confident_bm25=0.6)
    expected = distribution_based_score_fusion(
        rankings, weights={"bm25": 0.6, DOCUMENT_RANKING: 0.5 * 0.6}
    )
    assert fuse("dbsf", rankings, sure) == expected
    plain = fuse("dbsf", rankings, FusionParams())
    assert plain == distribution_based_score_fusion(rankings, weights={DOCUMENT_RANKING: 0.5})
    assert plain[0].key == "c" and expected[0].key == "a"
    # Below the threshold, or with no threshold, the weights are the usual ones.
    assert fuse("dbsf", rankings, FusionParams(confident_dense=0.73, confident_bm25=0.6)) == plain
    unsure = {**rankings, "dense": [("a", 0.69), *dense[1:]]}
    assert fuse("dbsf", unsure, sure) == fuse("dbsf", unsure, FusionParams())
    # Only DBSF reads it; RRF keeps its weights.
    assert fuse("rrf", rankings, sure) == fuse("rrf", rankings, FusionParams())
