"""Equal scores come back in one order, whatever order the engine found them in."""

from __future__ import annotations

import itertools

from ctxr.index.store.base import ScoredRecord, best_first
from tests.fixtures.stores import partial_payload


def test_equal_scores_are_ordered_by_point_id() -> None:
    records = [ScoredRecord(pid, score, partial_payload({})) for pid, score in
               [("b", 2.0), ("c", 1.0), ("a", 2.0), ("d", 3.0)]]  # fmt: skip
    expected = ["d", "a", "b", "c"]
    for order in itertools.permutations(records):
        assert [r.point_id for r in best_first(order)] == expected
