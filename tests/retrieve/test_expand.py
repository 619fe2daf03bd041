"""Expanding hits to their parent sections: exact text, collapsing, fallback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import Settings, load_settings
from ctxr.index.payload import space_after
from ctxr.pipeline.build import build_index
from ctxr.retrieve.expand import EXPAND_FAILED, EXPAND_UNAVAILABLE, expand_parents, rebuild
from ctxr.retrieve.service import SearchService
from ctxr.types import Hit, RetrieverScore
from tests.fakes.hash_embedder import HashEmbedder

# Chunks at 0..10, 12..23, 26..38 and 41..50, separated by whitespace only.
TEXT = "alpha beta\n\ngamma delta\n  epsilon zeta\n\n\neta theta"


def _point(start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "text": TEXT[start:end],
        "space_after": space_after(TEXT, end),
        "heading_path": [f"h{start}"],
        **extra,
    }


POINTS = [_point(0, 10), _point(12, 23), _point(26, 38), _point(41, 50)]
PARENTS = {"c0": (0, 38), "c1": (0, 38), "c2": (0, 38), "c3": (41, 50)}


def _hit(rank: int, chunk_id: str, **scores: tuple[float, int]) -> Hit:
    point = POINTS[int(chunk_id[1:])]
    return Hit(
        rank=rank,
        chunk_id=chunk_id,
        doc_id="d",
        source="d.txt",
        start=point["start"],
        end=point["end"],
        heading_path=tuple(point["heading_path"]),
        text=point["text"],
        context=f"context {chunk_id}",
        score=1.0 / rank,
        scores={name: RetrieverScore(s, r) for name, (s, r) in scores.items()},
    )


def _load(points: list[dict[str, Any]]) -> Any:
    calls: list[str] = []

    def load(doc_id: str) -> list[dict[str, Any]]:
        calls.append(doc_id)
        return points

    load.calls = calls  # type: ignore[attr-defined]
    return load


def test_hits_become_their_parent_sections_exactly() -> None:
    assert TEXT[41:50] == "eta theta" and TEXT[26:38] == "epsilon zeta"
    hits = [
        _hit(1, "c2", dense=(0.9, 1)),
        _hit(2, "c3"),
        _hit(3, "c0", bm25=(4.0, 1), dense=(0.5, 3)),
    ]
    load = _load(POINTS)
    expanded = expand_parents(hits, PARENTS, load)
    assert [(h.rank, h.chunk_id, h.start, h.end) for h in expanded.hits] == [
        (1, "c2", 0, 38),
        (2, "c3", 41, 50),
    ]
    first = expanded.hits[0]
    assert first.text == TEXT[0:38]
    assert first.heading_path == ("h0",) and first.context == "context c2"  # first chunk's; best's
    assert first.scores == {"dense": RetrieverScore(0.9, 1), "bm25": RetrieverScore(4.0, 1)}
    assert all(h.expanded and not h.flags for h in expanded.hits)
    assert expanded.spaces == {"c2": space_after(TEXT, 38), "c3": ""}
    assert load.calls == ["d"]  # one document read per search


def test_hits_without_a_parent_pass_unchanged_but_say_so() -> None:
    # An index not built with --chunking parent: the small chunks come back, flagged, where
    # they came back silently before.
    hits = [_hit(1, "c1"), _hit(2, "c3")]
    expanded = expand_parents(hits, {}, _load(POINTS))
    assert expanded.hits == [replace(h, flags=(EXPAND_UNAVAILABLE,)) for h in hits]
    assert expanded.spaces == {} and not any(h.expanded for h in expanded.hits)


def test_what_cannot_be_rebuilt_exactly_falls_back_flagged() -> None:
    missing = [POINTS[0], POINTS[2], POINTS[3]]  # the chunk 12..23 is gone
    assert rebuild(missing, 0, 38) is None
    short = [{**POINTS[0], "space_after": "\n"}, *POINTS[1:]]  # a gap wider than the space
    assert rebuild(short, 0, 38) is None
    assert rebuild(POINTS, 0, 40) is None  # does not reach the parent's end
    hits = [_hit(1, "c1"), _hit(2, "c3")]
    expanded = expand_parents(hits, PARENTS, _load(missing))
    assert expanded.hits[0] == replace(hits[0], flags=(EXPAND_FAILED,))
    assert expanded.hits[1].text == TEXT[41:50]


def test_overlapping_children_rebuild_exactly() -> None:
    points = [_point(0, 23), _point(6, 38), _point(12, 23)]
    rebuilt = rebuild(points, 0, 38)
    assert rebuilt is not None and rebuilt[0] == TEXT[0:38]


SECTIONS = [
    "# Lighthouse keeping\n\nThe keeper trims the wick and polishes the brass lantern each dusk.",
    "## The lamp\n\n"
    + " ".join(f"Lamp fact {i}: the lens turns and the lamp oil burns slowly." for i in range(12)),
    "## The fog signal\n\n"
    + "\n\n".join(f"Fog note {i}: the horn sounds twice a minute in fog." for i in range(10)),
    "# Tides\n\nTide tables tell the keeper when the causeway floods.",
]


@pytest.fixture
def parent_index(tmp_path: Path) -> Iterator[tuple[Settings, str]]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = "\n\n".join(SECTIONS) + "\n"
    (corpus / "keeper.md").write_text(text, encoding="utf-8")
    settings = load_settings(
        index_dir=tmp_path / "idx",
        cache_dir=tmp_path / "cache",
        context="outline",
        chunking="parent",
        chunk_tokens=40,
        parent_tokens=160,
    )
    build_index([corpus], settings, embedder=HashEmbedder())
    yield settings, text


def test_search_expands_to_the_files_exact_parent_text(parent_index: tuple[Settings, str]) -> None:
    settings, text = parent_index
    with SearchService(settings, embedder=HashEmbedder()) as service:
        plain = service.search("lamp lens oil", k=5, mode="bm25")
        expanded = service.search("lamp lens oil", k=5, mode="bm25", expand=True)
        doc = service.document(plain[0].doc_id)
        both = service.search("lamp lens oil fog horn", k=10, mode="bm25", expand=True, merge=True)
    assert doc is not None
    assert all(h.end - h.start < len(text) for h in plain)
    assert len(expanded) < len(plain)  # children of one section collapse into one hit
    for hit in expanded:
        assert not hit.flags
        assert hit.text == text[hit.start : hit.end]
        assert any(hit.start <= p.start and p.end <= hit.end for p in plain)
    assert any(h.end - h.start > p.end - p.start for h in expanded for p in plain[:1])
    for hit in both:
        assert not hit.flags and hit.text == text[hit.start : hit.end]
