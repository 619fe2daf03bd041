"""The embedder's input as a hard cap on chunks, and per-kind chunk budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.enrich.situate.contexts import ContextPlan, resolve_context
from ctxr.enrich.split import split_document
from ctxr.enrich.split.cap import cap_chunks, embedded_size
from ctxr.enrich.split.parent import split_parent_child
from ctxr.errors import ConfigError
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.pipeline.chunking import default_chunker
from ctxr.pipeline.recipe import document_recipe
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document, DocumentKind, chunk_id_for
from tests.fixtures.chunks import check_invariants
from tests.fixtures.documents import make_document
from tests.fixtures.index import BuiltIndex

LIMIT = 256 - 48  # the local MiniLM's input less the default context reserve


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder()  # count_tokens loads only the tokenizer


# Word pieces run far ahead of tiktoken tokens on these: long mixed-case identifiers and
# numbers in code, and Russian (about 1.8 word pieces a token; Japanese, by contrast, is
# about one word piece a token for the MiniLM and fits).
CODE_LINE = "const table = [" + ", ".join(
    f"rxQvZk{i}Wp: 0x{i * 7919:06x}Zq" for i in range(120)
) + "];\n"  # fmt: skip
PROSE = "Поисковый индекс делит документы на небольшие фрагменты и вычисляет их векторы. " * 40


@pytest.mark.parametrize(
    ("text", "kind", "language"),
    [
        ("def f():\n    return 1\n\n" + CODE_LINE + "\nx = 2\n", "code", "javascript"),
        (PROSE, "text", None),
        ("# Индекс\n\n" + PROSE + "\n\n## Далее\n\n" + PROSE, "markdown", None),
    ],
)
def test_chunks_over_the_embedder_input_are_split_until_they_fit(
    embedder: OnnxEmbedder, text: str, kind: DocumentKind, language: str | None
) -> None:
    doc = make_document(text, kind, language=language)
    plain = split_document(doc, max_tokens=200)
    assert max(embedder.count_tokens(c.text) for c in plain) > LIMIT  # the case at hand
    size = embedded_size(embedder.count_tokens)
    capped = cap_chunks(doc, plain, size, LIMIT)
    assert capped.resplit >= 1 and capped.unsplittable == []
    assert len(capped.chunks) > len(plain)
    assert all(size(c) <= LIMIT for c in capped.chunks)
    check_invariants(doc, capped.chunks)
    # The builder's chunker does the same when it has the embedder.
    settings = load_settings(chunk_tokens=200)
    assert default_chunker(settings, embedder)(doc) == capped.chunks


def test_fitting_chunks_are_left_alone(embedder: OnnxEmbedder) -> None:
    doc = make_document("A short paragraph.\n\nAnother one, just as short.", "text")
    chunks = split_document(doc, max_tokens=200)
    capped = cap_chunks(doc, chunks, embedded_size(embedder.count_tokens), LIMIT)
    assert capped.chunks is chunks and capped.resplit == 0


def test_pieces_keep_heading_prefix_and_parent(embedder: OnnxEmbedder) -> None:
    text = "# Guide\n\n## Индекс\n\n" + PROSE + "\n\n## Other\n\nShort."
    doc = make_document(text, "markdown")
    chunks = split_parent_child(doc, max_tokens=300, parent_tokens=1024)
    size = embedded_size(embedder.count_tokens)
    over = [c for c in chunks if size(c) > LIMIT]
    assert over
    capped = cap_chunks(doc, chunks, size, LIMIT)
    check_invariants(doc, capped.chunks)
    for original in over:
        pieces = [c for c in capped.chunks if original.start <= c.start < original.end]
        assert len(pieces) > 1
        for piece in pieces:
            assert piece.heading_path == original.heading_path
            assert piece.prefix == original.prefix
            assert (piece.parent_start, piece.parent_end) == (
                original.parent_start,
                original.parent_end,
            )


def test_an_unsplittable_run_is_kept_and_reported() -> None:
    doc = make_document("alpha beta gamma delta epsilon zeta eta theta", "text")
    chunks = split_document(doc, max_tokens=200)
    # No text ever fits (an empty one would: the prefix is not what is too long).
    capped = cap_chunks(doc, chunks, lambda c: 10_000 if c.text else 0, 100)
    assert capped.unsplittable and len(capped.unsplittable) == len(capped.chunks)
    assert all(c.token_count <= 4 for c in capped.chunks)
    check_invariants(doc, capped.chunks)


def test_a_prefix_over_the_cap_keeps_its_chunk_whole(embedder: OnnxEmbedder) -> None:
    # A heading of 150 words is every continued chunk's prefix: splitting the text under it
    # made 411 fragments of 2-4 tokens, each still over the embedder's input.
    heading = "# " + " ".join(f"word{i}" for i in range(150))
    body = "\n\n".join(" ".join(f"para{j} text{i}" for i in range(60)) for j in range(5))
    doc = make_document(f"{heading}\n\n{body}\n", "markdown")
    chunks = default_chunker(load_settings(), embedder)(doc)
    check_invariants(doc, chunks)
    assert len(chunks) < 20
    assert min(c.token_count for c in chunks if c.prefix) > 4


def test_the_truncation_notice_names_what_made_the_chunks(tmp_path: Path) -> None:
    from ctxr.pipeline.build import build_index, index_documents

    embedder = OnnxEmbedder()

    heading = "# " + " ".join(f"word{i}" for i in range(150))
    body = "\n\n".join(" ".join(f"para{j} text{i}" for i in range(60)) for j in range(3))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "long.md").write_text(f"{heading}\n\n{body}\n")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    report = build_index([tmp_path / "docs"], settings, embedder=embedder)
    [notice] = [n for n in report.notices if "exceed the embedder" in n]
    assert "ctxr's chunker made them" in notice and "chunker of your own" not in notice
    assert "docs/long.md" in notice and "prefix" in notice

    def whole(document: Document) -> list[Chunk]:  # a chunker of the caller's: one chunk
        text = document.text
        return [Chunk(chunk_id_for(document.doc_id, 0), document.doc_id, 0, text, 0, len(text),
                      count_tokens(text))]  # fmt: skip

    doc = make_document(body * 3, "text")
    own = index_documents([doc], settings.replace(index_dir=tmp_path / "own"),
                          chunker=whole, chunker_name="whole", embedder=embedder)  # fmt: skip
    [notice] = [n for n in own.notices if "exceed the embedder" in n]
    assert "the chunker this run was given" in notice


def test_per_kind_budgets() -> None:
    functions = "\n\n".join(f"def f{i}():\n    return {i} + {i}\n" for i in range(60))
    code = make_document(functions, "code")
    prose = make_document(" ".join(f"Sentence number {i} is here." for i in range(200)), "text")
    settings = load_settings(chunk_tokens=200, chunk_tokens_by_kind="code=40")
    chunker = default_chunker(settings)
    assert max(c.token_count for c in chunker(code)) <= 40
    assert max(c.token_count for c in chunker(prose)) > 40
    assert chunker(prose) == split_document(prose, max_tokens=200)
    assert settings.split.chunk_tokens_for("code") == 40
    assert settings.split.chunk_tokens_for("markdown") == 200


@pytest.mark.parametrize(
    "bad", ["code", "code=abc", "movie=300", "code=8", "code=300,pdf=99999"]
)  # fmt: skip
def test_bad_per_kind_budgets_are_config_errors(bad: str) -> None:
    with pytest.raises(ConfigError, match="CHUNK_TOKENS_BY_KIND"):
        load_settings(chunk_tokens_by_kind=bad)


def test_recipe_changes_only_when_set(tmp_path: Path) -> None:
    base: dict[str, Any] = {"index_dir": tmp_path, "context": "outline"}

    def recipe(**extra: Any) -> str:
        settings = load_settings(**base, **extra)
        return document_recipe(settings, resolve_context(settings.llm), "split")

    default = recipe()
    assert recipe(chunk_tokens_by_kind="") == default
    assert recipe(context_reserve_tokens=48) == default
    assert recipe(chunk_tokens_by_kind="code=300") != default
    assert recipe(chunk_tokens_by_kind="code=300") != recipe(chunk_tokens_by_kind="code=301")
    assert recipe(context_reserve_tokens=64) != default


def test_indexing_the_examples_truncates_nothing(examples_index: BuiltIndex) -> None:
    report = examples_index.report
    assert report.chunks_truncated == 0
    assert not any("exceed the embedder" in notice for notice in report.notices)


def test_the_cap_can_be_turned_off(embedder: OnnxEmbedder) -> None:
    doc = make_document(PROSE, "text")
    # Russian prose: language budgets would scale it; this test is about the cap alone.
    off = load_settings(chunk_tokens=200, cap_to_embedder=False, language_budgets=False)
    assert default_chunker(off, embedder)(doc) == split_document(doc, max_tokens=200)
    on = load_settings(chunk_tokens=200, language_budgets=False)
    assert default_chunker(on, embedder)(doc) != split_document(doc, max_tokens=200)
    plan = ContextPlan("outline")
    assert document_recipe(off, plan, "split") != document_recipe(on, plan, "split")
