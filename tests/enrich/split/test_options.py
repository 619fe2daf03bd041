"""The per-run chunking options: parent-child chunks and semantic chunks."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ctxr.config import load_settings
from ctxr.enrich.situate.contexts import resolve_context
from ctxr.enrich.split import split_document
from ctxr.enrich.split.parent import split_parent_child
from ctxr.enrich.split.semantic import breakpoints, split_semantic
from ctxr.errors import ConfigError
from ctxr.pipeline.chunking import default_chunker
from ctxr.pipeline.recipe import document_recipe
from ctxr.types import DocumentKind
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.chunks import check_invariants
from tests.fixtures.documents import make_document


def _markdown(seed: int) -> str:
    rng = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "lantern",
        "brass",
        "polish",
        "river",
        "stone",
        "engine",
        "valve",
    ]
    parts: list[str] = []
    for h in range(12):
        parts.append("#" * rng.randint(1, 3) + f" Section {h}")
        for _ in range(rng.randint(1, 5)):
            sentence = " ".join(rng.choice(words) for _ in range(rng.randint(5, 30)))
            parts.append(sentence.capitalize() + ".")
    return "\n\n".join(parts) + "\n"


def _prose(seed: int) -> str:
    rng = random.Random(seed)
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dogs",
        "while",
        "rivers",
        "run",
        "to",
        "the",
        "sea",
    ]
    paragraphs = []
    for _ in range(20):
        sentences = [
            " ".join(rng.choice(words) for _ in range(rng.randint(4, 25))).capitalize() + "."
            for _ in range(rng.randint(1, 6))
        ]
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["markdown", "text"])
def test_parent_child_children_stay_inside_their_parents(seed: int, kind: DocumentKind) -> None:
    text = _markdown(seed) if kind == "markdown" else _prose(seed)
    doc = make_document(text, kind)
    parents = split_document(doc, max_tokens=120, overlap_tokens=0)
    children = split_parent_child(doc, max_tokens=40, parent_tokens=120)
    check_invariants(doc, children, 40)
    spans = {(p.start, p.end) for p in parents}
    assert len(parents) > 1 and len(children) > len(parents)
    for child in children:
        assert child.parent_start is not None and child.parent_end is not None
        assert (child.parent_start, child.parent_end) in spans
        assert child.parent_start <= child.start and child.end <= child.parent_end
    # Every parent has children, which together hold all of its non-whitespace text.
    for parent in parents:
        inside = [c for c in children if c.parent_start == parent.start]
        assert inside and inside[0].start == parent.start and inside[-1].end == parent.end


def test_parent_child_keeps_the_structure_splitters_headings() -> None:
    doc = make_document(_markdown(3), "markdown")
    plain = {(c.start, c.end): c for c in split_document(doc, max_tokens=40)}
    for child in split_parent_child(doc, max_tokens=40, parent_tokens=120):
        same = plain.get((child.start, child.end))
        if same is not None:
            assert (child.heading_path, child.prefix) == (same.heading_path, same.prefix)
        assert child.heading_path  # every chunk of this document is under a heading


def test_parent_budget_below_chunk_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="parent_tokens"):
        split_parent_child(make_document("Some text.", "text"), max_tokens=64, parent_tokens=32)


CATS = [
    "Cats purr softly and cats nap in warm sunny windows.",
    "Many cats nap after cats purr and groom their soft fur.",
    "Cats groom fur, cats purr, and cats nap in the sun.",
    "A cat will purr and nap when cats feel warm and safe.",
    "Cats nap, cats purr, cats groom soft fur all day.",
]
ENGINES = [
    "Diesel engines burn fuel under high compression pressure.",
    "Engines with pistons compress fuel and air in cylinders.",
    "Diesel pistons compress air until fuel ignites in engines.",
    "Engine cylinders and pistons need fuel, air and compression.",
    "Fuel injection engines compress air in diesel cylinders.",
]


def test_semantic_chunks_cut_where_the_topic_changes() -> None:
    text = " ".join(CATS) + " " + " ".join(ENGINES)
    doc = make_document(text, "text")
    embedder = HashEmbedder()
    chunks = split_semantic(doc, embedder.embed, max_tokens=400, percentile=95)
    check_invariants(doc, chunks, 400)
    assert [c.text for c in chunks] == [" ".join(CATS), " ".join(ENGINES)]
    assert embedder.texts_embedded == len(CATS) + len(ENGINES)  # each sentence once


def test_a_semantic_segment_over_budget_is_split_by_structure() -> None:
    text = "\n\n".join([" ".join(CATS * 4), " ".join(ENGINES * 4)])
    doc = make_document(text, "text")
    chunks = split_semantic(doc, HashEmbedder().embed, max_tokens=40, overlap_tokens=0)
    check_invariants(doc, chunks, 40)
    boundary = text.index("Diesel")
    assert any(c.start == boundary for c in chunks)  # no chunk crosses the topic change
    assert all(c.end <= boundary or c.start >= boundary for c in chunks)


@pytest.mark.parametrize("seed", range(4))
def test_semantic_invariants_on_random_prose(seed: int) -> None:
    doc = make_document(_prose(seed), "text")
    chunks = split_semantic(doc, HashEmbedder().embed, max_tokens=50, percentile=80)
    check_invariants(doc, chunks, 50)


def test_semantic_leaves_structured_kinds_to_the_structure_splitter() -> None:
    doc = make_document(_markdown(1), "markdown")

    def refuse(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise AssertionError("a markdown document needs no sentence embeddings")

    assert split_semantic(doc, refuse, max_tokens=60) == split_document(doc, max_tokens=60)
    assert split_semantic(make_document("", "text"), refuse) == []
    with pytest.raises(ConfigError, match="percentile"):
        split_semantic(make_document("A b.", "text"), refuse, percentile=101)


def test_breakpoints_follow_the_percentile() -> None:
    vectors = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1], [1, 0]], dtype=np.float32)
    assert breakpoints(vectors, 50) == [2, 4]
    assert breakpoints(vectors, 100) == []
    assert breakpoints(vectors[:1], 95) == []


def test_settings_pick_the_chunker_and_shape_the_recipe(tmp_path: Path) -> None:
    doc = make_document(" ".join(CATS) + " " + " ".join(ENGINES), "text")
    base: dict[str, Any] = {"index_dir": tmp_path, "chunk_tokens": 200, "context": "outline"}
    structure = load_settings(**base)
    parent = load_settings(**base, chunking="parent", parent_tokens=400)
    semantic = load_settings(**base, chunking="semantic")
    assert default_chunker(structure)(doc) == split_document(doc, max_tokens=200)
    assert all(c.parent_end is not None for c in default_chunker(parent)(doc))
    assert len(default_chunker(semantic, HashEmbedder())(doc)) == 2
    plan = resolve_context(structure.llm)
    recipes = {document_recipe(s, plan, "split") for s in (structure, parent, semantic)}
    assert len(recipes) == 3
    other = load_settings(**base, chunking="parent", parent_tokens=800)
    assert document_recipe(other, plan, "split") != document_recipe(parent, plan, "split")
    with pytest.raises(ConfigError, match="CTXR_CHUNKING"):
        load_settings(chunking="sentences")
