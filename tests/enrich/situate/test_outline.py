"""Outline contexts: the document's title and path plus the heading trail, without a model."""

from __future__ import annotations

import pytest

from ctxr.enrich.situate.outline import OUTLINE_VERSION, outline_context, situate
from ctxr.types import Chunk, Document, DocumentKind, chunk_id_for
from tests.fixtures.documents import make_document


def _doc(
    source: str, title: str, kind: DocumentKind = "markdown", language: str | None = None
) -> Document:
    return make_document(
        "# Title\n\nbody\n", kind, doc_id=source, source=source, title=title, language=language
    )


def _chunk(
    doc: Document, heading_path: tuple[str, ...] = (), index: int = 0, text: str = "body"
) -> Chunk:
    return Chunk(chunk_id_for(doc.doc_id, index), doc.doc_id, index, text, 9, 13, 1, heading_path)


def test_title_path_and_trail_without_repeating_the_title() -> None:
    doc = _doc("docs/backup.md", "Backup and restore")
    chunk = _chunk(doc, ("Backup and restore", "Restoring", "Verify first"))
    assert outline_context(doc, chunk) == (
        "From Backup and restore (docs/backup.md), section: Restoring > Verify first."
    )


def test_title_equal_to_file_name_is_said_once() -> None:
    doc = _doc("notes/release-notes.txt", "release-notes.txt", kind="text")
    assert outline_context(doc, _chunk(doc)) == "From notes/release-notes.txt."


def test_a_chunk_that_opens_with_the_title_is_given_only_the_path() -> None:
    # Said twice, the title pulls a short document's first vector towards it (measured on
    # ArguAna, SciFact and NFCorpus with bench/quality/outline_prose.py).
    doc = _doc("docs/backup.md", "Backup and restore")
    for opening in ("# Backup and restore\n\nCopy the folder.", "Backup and restore: copy it."):
        assert outline_context(doc, _chunk(doc, text=opening)) == "From docs/backup.md."
    later = _chunk(doc, ("Backup and restore", "Restoring"), 1, "## Restoring\n\nStop first.")
    assert outline_context(doc, later) == (
        "From Backup and restore (docs/backup.md), section: Restoring."
    )
    # Only the whole title counts: a longer word that starts with it is not the title.
    doc = _doc("docs/back.md", "Back")
    assert outline_context(doc, _chunk(doc, text="Backup first.")) == "From Back (docs/back.md)."


def test_code_is_situated_by_path_and_symbol_not_language() -> None:
    # The language part was measured to hurt on the code set (bench/quality/outline_parts.py).
    doc = _doc("lumen/thumbnails.py", "thumbnails.py", kind="code", language="python")
    assert outline_context(doc, _chunk(doc)) == "From lumen/thumbnails.py."
    assert outline_context(doc, _chunk(doc, ("Thumbnailer", "resize"))) == (
        "From lumen/thumbnails.py, section: Thumbnailer > resize."
    )


def test_only_title_in_trail_gives_no_section() -> None:
    doc = _doc("docs/faq.md", "FAQ")
    assert outline_context(doc, _chunk(doc, ("FAQ",))) == "From FAQ (docs/faq.md)."


def test_situate_modes() -> None:
    doc = _doc("docs/faq.md", "FAQ")
    chunks = [_chunk(doc, ("FAQ", "Disk"), 0), _chunk(doc, (), 1)]
    outlined = situate(doc, chunks, "outline")
    assert [c.chunk for c in outlined] == chunks
    assert [c.context_kind for c in outlined] == ["outline", "outline"]
    assert outlined[0].context == "From FAQ (docs/faq.md), section: Disk."
    assert outlined[0].indexed_text() == "From FAQ (docs/faq.md), section: Disk.\n\nbody"

    bare = situate(doc, chunks, "none")
    assert [(c.context, c.context_kind) for c in bare] == [("", "none"), ("", "none")]
    assert bare[0].indexed_text() == "body"

    with pytest.raises(ValueError, match="LLM"):
        situate(doc, chunks, "llm")
    assert OUTLINE_VERSION.startswith("outline/")
