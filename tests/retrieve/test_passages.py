"""Merging adjacent hits of one document into passages, and weighted rank fusion in search."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from ctxr.config import load_settings, parse_weights
from ctxr.errors import ConfigError
from ctxr.index.payload import space_after
from ctxr.retrieve.fusion import reciprocal_rank_fusion
from ctxr.retrieve.passages import merge_adjacent
from ctxr.retrieve.service import SearchService
from ctxr.types import Hit, RetrieverScore
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

WEIGHTS = parse_weights("dense=0.8,bm25=0.2")
DOC = "0123456789abcdefghijklmnopqrstuvwxyz"


def _hit(rank: int, start: int, end: int, doc: str = "a.md", **scores: tuple[float, int]) -> Hit:
    return Hit(
        rank=rank,
        chunk_id=f"{doc}#{start}",
        doc_id=doc,
        source=doc,
        start=start,
        end=end,
        heading_path=(f"h{start}",),
        text=DOC[start:end],
        context=f"context {start}",
        score=1.0 / rank,
        scores={name: RetrieverScore(s, r) for name, (s, r) in scores.items()},
    )


def test_touching_and_overlapping_hits_become_one_passage() -> None:
    hits = [
        _hit(1, 10, 20, dense=(0.9, 1)),
        _hit(2, 0, 5, doc="b.md", dense=(0.8, 2)),
        _hit(3, 20, 26, dense=(0.7, 3), bm25=(4.0, 2)),  # touches the first
        _hit(4, 24, 30, bm25=(5.0, 1)),  # overlaps the third
        _hit(5, 32, 36),  # a gap: its own passage
    ]
    passages = merge_adjacent(hits)
    assert [(p.rank, p.doc_id, p.start, p.end) for p in passages] == [
        (1, "a.md", 10, 30),
        (2, "b.md", 0, 5),
        (3, "a.md", 32, 36),
    ]
    merged = passages[0]
    assert merged.text == DOC[10:30]
    assert merged.chunk_id == "a.md#10" and merged.context == "context 10"  # the best hit's
    assert merged.score == 1.0
    assert merged.heading_path == ("h10",)  # the first chunk's
    assert merged.scores == {"dense": RetrieverScore(0.9, 1), "bm25": RetrieverScore(5.0, 1)}


def test_a_chunk_inside_another_and_best_hit_later_in_the_text() -> None:
    hits = [_hit(1, 8, 12), _hit(2, 0, 20), _hit(3, 3, 9)]
    [passage] = merge_adjacent(hits)
    assert (passage.start, passage.end, passage.text) == (0, 20, DOC[0:20])
    assert passage.chunk_id == "a.md#8" and passage.heading_path == ("h0",)


def test_nothing_to_merge_keeps_hits_as_they_are() -> None:
    hits = [_hit(1, 0, 5), _hit(2, 6, 9), _hit(3, 0, 5, doc="b.md")]
    assert merge_adjacent(hits) == hits
    assert merge_adjacent([]) == []


def test_a_whitespace_gap_is_bridged_with_the_stored_space() -> None:
    text = "alpha beta\n\n  gamma delta"
    first = replace(_hit(2, 0, 10), text=text[0:10])
    second = replace(_hit(1, 14, 25), text=text[14:25])
    assert space_after(text, 10) == "\n\n  " and space_after(text, 25) == ""
    assert len(merge_adjacent([second, first])) == 2  # without the space: not adjacent
    [passage] = merge_adjacent([second, first], {first.chunk_id: space_after(text, 10)})
    assert (passage.start, passage.end, passage.text) == (0, 25, text)
    assert passage.chunk_id == second.chunk_id and passage.heading_path == first.heading_path
    short = {first.chunk_id: "\n"}  # a gap longer than the space after it: not bridged
    assert len(merge_adjacent([second, first], short)) == 2


@pytest.fixture
def service(examples_index: BuiltIndex) -> Iterator[SearchService]:
    with SearchService(examples_index.settings) as opened:
        yield opened


def test_merge_in_search_joins_neighbouring_chunks(service: SearchService) -> None:
    query = "thumbnail cache eviction"
    source = "examples/lumen/thumbnails.py"
    hits = service.search(query, k=6, filters={"source": source})
    passages = service.search(query, k=6, filters={"source": source}, merge=True)
    assert len(hits) == 6 and len(passages) < len(hits)  # six of eight chunks: some neighbour
    assert [p.rank for p in passages] == list(range(1, len(passages) + 1))
    assert passages[0].chunk_id == hits[0].chunk_id and passages[0].score == hits[0].score
    text = (ROOT / source).read_text(encoding="utf-8")
    for passage in passages:
        assert passage.text == text[passage.start : passage.end]  # gaps filled exactly
        assert any(h.start == passage.start for h in hits)
        assert any(h.end == passage.end for h in hits)
    assert sum(p.end - p.start for p in passages) >= sum(h.end - h.start for h in hits)


def test_weighted_fusion_matches_the_hand_computed_scores(examples_index: BuiltIndex) -> None:
    settings = load_settings(
        index_dir=examples_index.index_dir,
        cache_dir=examples_index.cache_dir,
        fusion_weights="dense=0.8,bm25=0.2",
        doc_ranking="off",  # two rankings, as the hand computation below
    )
    with SearchService(settings) as service:
        query = "restore a backup"
        hits = service.search(query, k=10, fusion="weighted", candidates=20)
        [rankings] = service.retrieve([query], "hybrid", 20)
    ranks = {
        name: {r.point_id: i for i, r in enumerate(rs, start=1)} for name, rs in rankings.items()
    }
    expected = {
        key: 0.8 / ranks["dense"][key] if key in ranks["dense"] else 0.0
        for key in set(ranks["dense"]) | set(ranks["bm25"])
    }
    for key, rank in ranks["bm25"].items():
        expected[key] += 0.2 / rank
    best = sorted(expected.values(), reverse=True)[:10]
    assert [h.score for h in hits] == pytest.approx(best)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.chunk_id])
        assert {n: s.rank for n, s in hit.scores.items()} == {
            n: ranks[n][hit.chunk_id] for n in ranks if hit.chunk_id in ranks[n]
        }


def test_bad_fusion_weights_name_the_setting() -> None:
    for bad in ("dense=0.8;bm25=0.2", "dense=x", "dense=-1", "dense=0,bm25=0", "colbert=1"):
        with pytest.raises(ConfigError, match="CTXR_FUSION_WEIGHTS"):
            load_settings(fusion_weights=bad)


def test_weighted_rank_fusion_by_hand() -> None:
    dense = [("a", 0.9), ("b", 0.8)]
    bm25 = [("b", 7.0), ("c", 5.0)]
    fused = reciprocal_rank_fusion({"dense": dense, "bm25": bm25}, k=0, weights=WEIGHTS)
    # a: 0.8/1; b: 0.8/2 + 0.2/1; c: 0.2/2
    assert [f.key for f in fused] == ["a", "b", "c"]
    assert [f.score for f in fused] == pytest.approx([0.8, 0.6, 0.1])
    assert fused[1].by_retriever == {
        "dense": RetrieverScore(0.8, 2),
        "bm25": RetrieverScore(7.0, 1),
    }
