"""PDF loading (pypdf text layer, page breaks) and page numbers on chunks."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pypdf
import pytest

from ctxr.enrich.load.documents import load_document
from ctxr.enrich.split import split_document
from ctxr.enrich.split.pages import page_starts, pages_of
from ctxr.errors import LoadError
from ctxr.types import PAGE_BREAK
from tests.fixtures.chunks import split_checked
from tests.fixtures.pdf import make_pdf, sentences


def test_text_is_pages_joined_by_page_break(tmp_path: Path) -> None:
    path = tmp_path / "two.pdf"
    path.write_bytes(make_pdf([["Hello page one.", "Second line (here)."], ["Page two text."]]))
    doc = load_document(path)
    assert doc.kind == "pdf"
    assert doc.title == "two.pdf"
    pages = doc.text.split(PAGE_BREAK)
    assert [p.strip() for p in pages] == ["Hello page one.\nSecond line (here).", "Page two text."]
    chunks = split_document(doc, max_tokens=64)
    assert len(chunks) == 1 and chunks[0].pages == (1, 2)


def test_chunks_carry_their_pages(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(make_pdf([sentences(p, 30) for p in (1, 2, 3)]))
    doc = load_document(path)
    chunks = split_checked(doc, 64)
    breaks = page_starts(doc.text)
    assert len(breaks) == 2
    for chunk in chunks:
        first = (
            int(chunk.text.split("Page ", 1)[1].split()[0])
            if chunk.text.startswith("Page")
            else None
        )
        assert chunk.pages == tuple(range(chunk.pages[0], chunk.pages[-1] + 1))
        if first is not None:
            assert chunk.pages[0] == first
        spans_break = any(chunk.start < b < chunk.end for b in breaks)
        assert (len(chunk.pages) > 1) == spans_break
        for page in chunk.pages:
            assert f"Page {page} sentence" in chunk.text or spans_break
    assert {p for c in chunks for p in c.pages} == {1, 2, 3}
    assert chunks[-1].pages[-1] == 3
    # prose overlap (10%) applies to PDFs as to text
    assert any(b.start < a.end for a, b in itertools.pairwise(chunks))


def test_pages_of() -> None:
    text = "ab" + PAGE_BREAK + "cd" + PAGE_BREAK + "ef"
    breaks = page_starts(text)
    assert pages_of(breaks, 0, 2) == (1,)
    assert pages_of(breaks, text.index("c"), text.index("d") + 1) == (2,)
    assert pages_of(breaks, 0, len(text)) == (1, 2, 3)


def test_no_text_layer_says_ocr(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(make_pdf([[], []]))
    with pytest.raises(LoadError, match="no text layer: OCR it first") as info:
        load_document(path)
    assert info.value.path == path.as_posix()


def _encrypted(path: Path, line: str, user_password: str) -> Path:
    """A one-line PDF at `path`, encrypted: opening it needs `user_password` ("" for none)."""
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf([[line]]))))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def test_encrypted_pdf_says_decrypt(tmp_path: Path) -> None:
    path = _encrypted(tmp_path / "locked.pdf", "secret", user_password="pw")
    with pytest.raises(LoadError, match=r"encrypted PDF.*qpdf --decrypt"):
        load_document(path)


def test_damaged_pdf_is_a_load_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(LoadError, match=r"broken\.pdf") as info:
        load_document(path)
    assert "qpdf" in info.value.reason


def test_empty_password_pdf_is_read(tmp_path: Path) -> None:
    path = _encrypted(tmp_path / "owner-only.pdf", "open text", user_password="")
    assert "open text" in load_document(path).text
