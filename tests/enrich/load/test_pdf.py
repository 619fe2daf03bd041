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
from tests.enrich.split.test_split import check_invariants


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF, one text line per entry, written by hand (no binary fixtures)."""
    n = len(pages)
    font = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
    ]
    for i, lines in enumerate(pages):
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({esc}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>" % (font, 4 + 2 * i)
        )
        objs.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for k, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (k, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def sentences(page: int, count: int) -> list[str]:
    return [
        f"Page {page} sentence {i} talks about topic {page * 100 + i} at length."
        for i in range(count)
    ]


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
    chunks = split_document(doc, max_tokens=64)
    check_invariants(doc, chunks, 64)
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


def test_encrypted_pdf_says_decrypt(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf([["secret"]]))))
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="RC4-128")
    path = tmp_path / "locked.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(LoadError, match=r"encrypted PDF.*qpdf --decrypt"):
        load_document(path)


def test_damaged_pdf_is_a_load_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(LoadError, match=r"broken\.pdf") as info:
        load_document(path)
    assert "qpdf" in info.value.reason


def test_empty_password_pdf_is_read(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf([["open text"]]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    path = tmp_path / "owner-only.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    assert "open text" in load_document(path).text
