"""What the format loaders cost: cold import of each library, and load time per file.

Side by side in one run: a bare interpreter start, then the import each loader pays on its
first file (docutils for .rst; markitdown's converters for Office/EPUB), each in a fresh
subprocess, median of 5; then `load_document` on small files of every kind (written here with
python-docx, python-pptx, openpyxl and ebooklib: needs the ``office-test`` extra), median of 5
after a warm-up. Prints the load average, since the machine is shared.

    python -m bench.speed.loaders
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.measure import Span, cold_start, load_line, say
from bench.common.measure import parser as cli

OFFICE_TEST = "the files are written with the office-test extra: pip install -e '.[office-test]'"
IMPORTS = {
    "bare interpreter": "pass",
    "docutils (.rst)": "import docutils.core, docutils.parsers.rst",
    "markitdown converters (.docx/.pptx/.xlsx/.epub)": (
        "from markitdown.converters import DocxConverter, PptxConverter, XlsxConverter, "
        "EpubConverter"
    ),
}


def _cold(code: str, runs: int) -> float:
    times = [cold_start(code) for _ in range(runs)]
    measured = [t for t in times if t is not None]
    if len(measured) < len(times):
        raise SystemExit(f"`{code}` failed in a fresh interpreter; {OFFICE_TEST}")
    return statistics.median(measured)


def _fixtures(root: Path) -> list[Path]:
    try:
        import docx
        import openpyxl
        import pptx
        from ebooklib import epub
    except ImportError as exc:
        raise SystemExit(f"{exc.name} is missing; {OFFICE_TEST}") from None

    # The tests' own documents; run as a module from the repository root, `tests` imports.
    from tests.fixtures.formats import RST, write_notebook

    (root / "guide.md").write_text("# Guide\n\n" + "Polish the brass. " * 200)
    (root / "guide.rst").write_text(RST * 10)
    write_notebook(root / "tides.ipynb")
    word = docx.Document()
    for k in range(20):
        word.add_heading(f"Section {k}", 1)
        word.add_paragraph("Wipe the lens with warm vinegar water. " * 10)
    word.save(root / "manual.docx")
    deck = pptx.Presentation()
    for k in range(20):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide title {k}"
        slide.placeholders[1].text = "Paraffin deliveries move to the spring tide. " * 5
    deck.save(root / "deck.pptx")
    book = openpyxl.Workbook()
    for row in range(200):
        book.active.append([f"item {row}", row, row * 2.5])
    book.save(root / "stock.xlsx")
    ebook = epub.EpubBook()
    ebook.set_identifier("b")
    ebook.set_title("Book")
    chapters = []
    for k in range(10):
        chapter = epub.EpubHtml(title=f"C{k}", file_name=f"c{k}.xhtml")
        chapter.content = f"<h1>Chapter {k}</h1>" + "<p>At dawn he snuffs each flame.</p>" * 20
        ebook.add_item(chapter)
        chapters.append(chapter)
    ebook.spine = chapters
    ebook.add_item(epub.EpubNcx())
    ebook.add_item(epub.EpubNav())
    epub.write_epub(str(root / "book.epub"), ebook)
    return sorted(root.iterdir())


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--runs", type=int, default=5, help="cold imports and loads, each")
    args = parser.parse_args(argv)
    from ctxr.enrich.load.documents import load_document

    say(load_line("at start"))
    for name, code in IMPORTS.items():
        say(f"cold import  {name:<50} {_cold(code, args.runs):6.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        rows = {}
        for path in _fixtures(Path(tmp)):
            load_document(path)  # warm: imports paid once
            times = []
            for _ in range(args.runs):
                with Span() as span:
                    doc = load_document(path)
                times.append(span.seconds)
            rows[path.name] = {
                "bytes": path.stat().st_size,
                "chars": len(doc.text),
                "ms": round(statistics.median(times) * 1000, 1),
            }
    say(json.dumps(rows, indent=1))
    say(load_line("at end"))


if __name__ == "__main__":
    main()
