"""Word, PowerPoint, Excel and EPUB files written by their own libraries, loaded through
markitdown and found by search with the right heading, slide or sheet.

Needs the ``office-test`` extra (markitdown and the writers); `.ci/run` installs it in a step of
its own. Without it these tests are skipped, saying so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.enrich.load.documents import load_document
from ctxr.enrich.split import split_document
from ctxr.errors import LoadError
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder

_SKIP = "needs the office-test extra: pip install -e '.[office-test]'"
pytest.importorskip("markitdown", reason=_SKIP)
docx = pytest.importorskip("docx", reason=_SKIP)
pptx = pytest.importorskip("pptx", reason=_SKIP)
openpyxl = pytest.importorskip("openpyxl", reason=_SKIP)
epub = pytest.importorskip("ebooklib.epub", reason=_SKIP)

FILLER = (
    "The keeper's log records the weather, the ships that passed and the oil burned each "
    "night, so that the harbour board can check the light was never left untended."
)


def _docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Keeper's Manual", 1)
    document.add_paragraph(FILLER)
    document.add_heading("Lens care", 2)
    document.add_paragraph("Wipe the Fresnel lens with warm vinegar water before sunset.")
    document.save(path)
    return path


def _pptx(path: Path) -> Path:
    deck = pptx.Presentation()
    slides = [
        ("Harbour budget", FILLER),
        ("Fuel", "Paraffin deliveries move to the spring tide each March."),
    ]
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(path)
    return path


def _xlsx(path: Path) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Inventory"
    sheet.append(["item", "count"])
    for k in range(8):
        sheet.append([f"spare wick {k}", k])
    suppliers = book.create_sheet("Suppliers")
    suppliers.append(["name", "city"])
    suppliers.append(["Wickworks chandlery", "Lisbon"])
    book.save(path)
    return path


def _epub(path: Path) -> Path:
    book = epub.EpubBook()
    book.set_identifier("lamplighter-1")
    book.set_title("The Lamplighter")
    book.set_language("en")
    dusk = epub.EpubHtml(title="Dusk", file_name="dusk.xhtml", lang="en")
    dusk.content = f"<h1>Dusk</h1><p>{FILLER}</p>"
    dawn = epub.EpubHtml(title="Dawn", file_name="dawn.xhtml", lang="en")
    dawn.content = "<h1>Dawn</h1><p>At dawn he snuffs each flame with a brass cap.</p>"
    for chapter in (dusk, dawn):
        book.add_item(chapter)
    book.toc = (dusk, dawn)
    book.spine = [dusk, dawn]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    epub.write_epub(str(path), book)
    return path


def test_office_files_load_with_structure(tmp_path: Path) -> None:
    word = load_document(_docx(tmp_path / "manual.docx"))
    assert word.kind == "office" and "# Keeper's Manual" in word.text
    slides = load_document(_pptx(tmp_path / "deck.pptx"))
    assert "# Slide 1: Harbour budget" in slides.text and "# Slide 2: Fuel" in slides.text
    assert "<!-- Slide number" not in slides.text
    sheets = load_document(_xlsx(tmp_path / "stock.xlsx"))
    assert "## Inventory\n| item | count |" in sheets.text and "## Suppliers" in sheets.text
    book = load_document(_epub(tmp_path / "book.epub"))
    assert book.title == "The Lamplighter" and "# Dawn" in book.text
    for doc in (word, slides, sheets, book):
        for chunk in split_document(doc, max_tokens=40):
            assert doc.text[chunk.start : chunk.end] == chunk.text


def test_search_finds_a_phrase_from_each_with_its_heading_slide_or_sheet(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _docx(corpus / "manual.docx")
    _pptx(corpus / "deck.pptx")
    _xlsx(corpus / "stock.xlsx")
    _epub(corpus / "book.epub")
    settings = load_settings(
        index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", chunk_tokens=40
    )
    report = build_index([corpus], settings, embedder=HashEmbedder())
    assert report.failed == [] and report.documents_indexed == 4
    expected = {
        "Fresnel lens vinegar": ("manual.docx", ("Keeper's Manual", "Lens care")),
        "paraffin deliveries spring tide": ("deck.pptx", ("Slide 2: Fuel",)),
        "Wickworks chandlery Lisbon": ("stock.xlsx", ("Suppliers",)),
        "snuffs each flame brass cap": ("book.epub", ("Dawn",)),
    }
    with SearchService(settings, embedder=HashEmbedder()) as service:
        for query, (name, trail) in expected.items():
            hit = service.search(query, k=1, mode="bm25")[0]
            assert (Path(hit.source).name, hit.heading_path) == (name, trail), query


def test_a_missing_office_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _docx(tmp_path / "manual.docx")
    monkeypatch.setitem(sys.modules, "markitdown", None)  # as if not installed
    with pytest.raises(LoadError, match=r"pip install 'ctxr\[office\]'"):
        load_document(path)


def test_a_damaged_office_file_is_named_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "broken.docx"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(LoadError, match=r"broken\.docx: cannot convert this docx file"):
        load_document(path)
