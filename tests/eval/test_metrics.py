"""Metrics on hand-computed cases; expected values are worked out in the comments."""

from __future__ import annotations

import math

import pytest

from ctxr.eval.metrics import (
    MetricReport,
    evaluate_run,
    metric_names,
    mrr_at_k,
    ndcg_at_k,
    pass_at_k,
    recall_at_k,
    report_run,
)


def test_pass_at_k_counts_share_of_several_golden() -> None:
    retrieved = ["a", "x", "b", "y", "c"]
    golden = {"a", "b", "c", "d"}
    assert pass_at_k(retrieved, golden, 1) == pytest.approx(1 / 4)  # a
    assert pass_at_k(retrieved, golden, 3) == pytest.approx(2 / 4)  # a, b
    assert pass_at_k(retrieved, golden, 5) == pytest.approx(3 / 4)  # a, b, c; d never


def test_pass_at_k_counts_duplicates_once() -> None:
    # "a" three times in the top 3 is still one golden id of two found.
    assert pass_at_k(["a", "a", "a", "b"], ["a", "b"], 3) == pytest.approx(0.5)
    assert pass_at_k(["a", "a", "a", "b"], ["a", "b"], 4) == pytest.approx(1.0)


def test_pass_at_k_matches_ids_not_text() -> None:
    # Two chunks with identical text ("return None") but different ids: retrieving the twin
    # of the golden chunk earns nothing; only the golden id counts.
    texts = {"doc1#3": "return None", "doc2#7": "return None"}
    assert texts["doc1#3"] == texts["doc2#7"]
    golden = {"doc2#7"}
    assert pass_at_k(["doc1#3"], golden, 5) == 0.0
    assert pass_at_k(["doc1#3", "doc2#7"], golden, 5) == 1.0
    assert recall_at_k(["doc1#3"], {"doc2#7": 1}, 5) == 0.0


def test_empty_retrieved_and_k_beyond_list() -> None:
    assert pass_at_k([], {"a"}, 5) == 0.0
    assert recall_at_k([], {"a": 1}, 5) == 0.0
    assert mrr_at_k([], {"a": 1}) == 0.0
    assert ndcg_at_k([], {"a": 1}) == 0.0
    # k = 100 over a list of 2 reads the whole list.
    assert pass_at_k(["z", "a"], {"a", "b"}, 100) == pytest.approx(0.5)
    assert mrr_at_k(["z", "a"], {"a"}, 100) == pytest.approx(0.5)


def test_no_golden_scores_zero_and_bad_k_raises() -> None:
    assert pass_at_k(["a"], set(), 5) == 0.0
    assert recall_at_k(["a"], {"a": 0}, 5) == 0.0
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k(["a"], {"a"}, 0)


def test_recall_ignores_zero_grades_and_takes_plain_sets() -> None:
    qrels = {"a": 2, "b": 1, "n": 0}
    # relevant = {a, b}; top 2 = [n, a] -> 1/2; the judged-irrelevant "n" gains nothing.
    assert recall_at_k(["n", "a", "b"], qrels, 2) == pytest.approx(0.5)
    assert recall_at_k(["n", "a", "b"], qrels, 3) == pytest.approx(1.0)
    assert recall_at_k(["n", "a"], ["a", "b", "c", "d"], 2) == pytest.approx(0.25)


def test_mrr_first_relevant_within_k() -> None:
    assert mrr_at_k(["x", "y", "a", "b"], {"a": 1, "b": 1}) == pytest.approx(1 / 3)
    assert mrr_at_k(["x", "y", "a"], {"a": 1}, k=2) == 0.0
    assert mrr_at_k(["x", "n", "a"], {"n": 0, "a": 1}) == pytest.approx(1 / 3)


def test_ndcg_graded_by_hand() -> None:
    qrels = {"a": 3, "b": 2, "c": 1}
    retrieved = ["c", "x", "a", "b"]
    # DCG  = 1/log2(2) + 0 + 3/log2(4) + 2/log2(5) = 1 + 1.5 + 0.861353 = 3.361353
    # IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)    = 3 + 1.261860 + 0.5 = 4.761860
    dcg = 1 + 3 / 2 + 2 / math.log2(5)
    idcg = 3 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at_k(retrieved, qrels, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(retrieved, qrels, 10) == pytest.approx(0.705891, abs=1e-6)
    # Linear gain, not 2**g - 1: with exponential gain this would be (1 + 7/2 + 3/log2 5)/...
    assert ndcg_at_k(["a", "b", "c"], qrels) == pytest.approx(1.0)


def test_ndcg_cut_at_k_truncates_ideal_too() -> None:
    qrels = {"a": 3, "b": 2, "c": 1}
    # k=1: DCG = 2/log2(2) = 2 ("b" first); IDCG@1 = 3 -> 2/3.
    assert ndcg_at_k(["b", "a"], qrels, 1) == pytest.approx(2 / 3)


def test_ndcg_duplicate_gains_once() -> None:
    qrels = {"a": 1, "b": 1}
    # [a, a, b]: DCG = 1 + 0 (repeat) + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.630930
    expected = 1.5 / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["a", "a", "b"], qrels) == pytest.approx(expected)
    assert ndcg_at_k(["a", "a", "a"], {"a": 1}) == pytest.approx(1.0)


def test_evaluate_run_macro_averages_and_missing_query_scores_zero() -> None:
    qrels = {
        "q1": {"a": 1, "b": 1},
        "q2": {"c": 1},
        "q3": {"d": 1},  # the run never answers q3
    }
    run = {
        "q1": ["a", "x", "x2", "x3", "x4", "b"],  # a at 1, b at 6
        "q2": ["y", "c"],  # c at 2
        "q_extra": ["whatever"],  # not judged: ignored
    }
    scores = evaluate_run(run, qrels, ks=(5, 10))
    assert list(scores) == metric_names((5, 10))
    # pass@5: q1 1/2, q2 1, q3 0 -> 1.5/3
    assert scores["pass@5"] == pytest.approx(0.5)
    # pass@10: q1 1, q2 1, q3 0 -> 2/3
    assert scores["pass@10"] == pytest.approx(2 / 3)
    assert scores["recall@10"] == pytest.approx(2 / 3)
    # mrr@10: q1 1, q2 1/2, q3 0 -> 0.5
    assert scores["mrr@10"] == pytest.approx(0.5)
    # ndcg@10: q1 (1 + 1/log2 7)/(1 + 1/log2 3); q2 1/log2 3; q3 0
    q1 = (1 + 1 / math.log2(7)) / (1 + 1 / math.log2(3))
    q2 = 1 / math.log2(3)
    assert scores["ndcg@10"] == pytest.approx((q1 + q2) / 3)


def test_report_run_keeps_per_query_and_formats() -> None:
    report = report_run({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"b": 1}, "empty": {}})
    assert isinstance(report, MetricReport)
    # A query with no judgments at all is not scored (pytrec_eval does the same).
    assert report.num_queries == 2
    assert report.per_query["q1"]["pass@5"] == 1.0
    assert report.per_query["q2"]["pass@5"] == 0.0
    assert report.scores["pass@20"] == pytest.approx(0.5)
    assert "pass@5" in report.format() and "50.00" in report.format()


def test_evaluate_run_empty_qrels() -> None:
    assert evaluate_run({}, {}) == dict.fromkeys(metric_names(), 0.0)
