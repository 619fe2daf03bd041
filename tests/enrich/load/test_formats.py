"""reStructuredText and Jupyter notebooks: loaded with structure, found with their trails."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.enrich.load.documents import kind_of, load_document
from ctxr.enrich.split import split_document
from ctxr.errors import LoadError
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.formats import RST, write_notebook


def test_rst_sections_become_heading_trails(tmp_path: Path) -> None:
    path = tmp_path / "guide.rst"
    path.write_text(RST)
    doc = load_document(path)
    assert (doc.kind, doc.title) == ("rst", "Lantern Guide")
    assert kind_of(path) == ("rst", None)
    assert "calls polish_brass every week" in " ".join(doc.text.split())  # roles keep text
    assert "```python\ndef polish_brass(collar):" in doc.text
    assert "Version added 2.1" in doc.text and "toctree" not in doc.text
    assert "| part | spare |\n| --- | --- |\n| chimney | 3 |" in doc.text
    chunks = split_document(doc, max_tokens=40)
    trails = {c.heading_path for c in chunks}
    assert ("Lantern Guide", "Care of the lamp", "Trimming wicks") in trails
    for chunk in chunks:
        assert doc.text[chunk.start : chunk.end] == chunk.text


def test_notebook_cells_numbered_outputs_dropped(tmp_path: Path) -> None:
    doc = load_document(write_notebook(tmp_path / "tides.ipynb"))
    assert (doc.kind, doc.title, doc.language) == ("notebook", "Tide tables", "python")
    assert "```python cell 3\nimport pandas as pd" in doc.text
    assert "iVBORw0KGgo" not in doc.text and "SECRET OUTPUT" not in doc.text
    assert "documentclass" not in doc.text  # raw cells are not the document
    trails = {c.heading_path for c in split_document(doc, max_tokens=30)}
    assert ("Tide tables", "Loading the harbour data") in trails


def test_a_broken_notebook_is_named_with_the_fix(tmp_path: Path) -> None:
    bad = tmp_path / "half.ipynb"
    bad.write_text('{"cells": [')
    with pytest.raises(LoadError, match=r"not valid notebook JSON.*re-save it"):
        load_document(bad)
    old = tmp_path / "v3.ipynb"
    old.write_text('{"worksheets": [], "nbformat": 3}')
    with pytest.raises(LoadError, match="nbformat 4 expected"):
        load_document(old)


def test_search_finds_rst_and_notebook_phrases_with_their_trails(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "guide.rst").write_text(RST)
    write_notebook(corpus / "tides.ipynb")
    settings = load_settings(
        index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", chunk_tokens=40
    )
    report = build_index([corpus], settings, embedder=HashEmbedder())
    assert report.failed == [] and report.documents_indexed == 2
    with SearchService(settings, embedder=HashEmbedder()) as service:
        wick = service.search("quarter inch evening watch", k=1, mode="bm25")[0]
        tides = service.search("harbour_tides csv read", k=1, mode="bm25")[0]
    assert wick.source.endswith("guide.rst")
    assert wick.heading_path == ("Lantern Guide", "Care of the lamp", "Trimming wicks")
    assert tides.source.endswith("tides.ipynb")
    assert tides.heading_path == ("Tide tables", "Loading the harbour data")
    assert "cell 3" in tides.text


@pytest.mark.parametrize(
    ("heading", "trail"),
    [
        ("# Background Tasks { #background-tasks }", "Background Tasks"),
        ("## Install {#install .new data-x=1}", "Install"),
        ("## Options {-}", "Options"),
        ("## Using {name} in templates", "Using {name} in templates"),
    ],
)
def test_markdown_heading_attribute_lists_leave_the_trail(
    tmp_path: Path, heading: str, trail: str
) -> None:
    path = tmp_path / "page.md"
    path.write_text(f"{heading}\n\nBody text.\n")
    doc = load_document(path)
    assert doc.title == (trail if heading.startswith("# ") else "page.md")  # H1 only
    assert split_document(doc)[0].heading_path == (trail,)
