"""PDF documents: the text layer of every page, read with pypdf (no system tools).

``Document.text`` is the pages' text joined by ``PAGE_BREAK`` (a line break, a form feed and
another line break). The form feed marks where each page starts, so page numbers need no side
table: ``pages_of`` counts the form feeds before an offset. The line breaks around it make a
page break a paragraph seam for the prose splitter. Form feeds inside a page's own text are
turned into line breaks so that the count stays exact.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

from ctxr.enrich.load.reading import read_regular
from ctxr.enrich.load.walk import display_path
from ctxr.errors import LoadError
from ctxr.types import PAGE_BREAK, Document, text_hash

_OCR_HINT = "scanned PDF with no text layer: OCR it first, e.g. `ocrmypdf {src} {src}.ocr.pdf`"


def load_pdf(path: Path) -> Document:
    """Read a PDF's text layer; raise a `LoadError` naming the file and the fix."""
    import pypdf  # imported here: only corpora with PDFs pay for it
    from pypdf.errors import PdfReadError

    source = display_path(path)  # a name that is not UTF-8 keeps its bytes as escapes
    # pypdf logs every malformed-but-recoverable object; one summary error is enough for us.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(read_regular(path)))
        if reader.is_encrypted and not reader.decrypt(""):
            raise LoadError(
                source,
                "encrypted PDF that needs a password; decrypt it first, e.g. "
                f"`qpdf --decrypt --password=PASSWORD {source} {source}.plain.pdf`",
            )
        pages = [(page.extract_text() or "").replace("\f", "\n") for page in reader.pages]
        title = _metadata_title(reader)
    except LoadError:
        raise
    except OSError as exc:
        raise LoadError(source, f"cannot read ({exc.strerror}); check its permissions") from exc
    except PdfReadError as exc:
        raise LoadError(
            source,
            f"not a readable PDF ({exc}); repair it, e.g. `qpdf {source} {source}.fixed.pdf`",
        ) from exc
    except Exception as exc:  # pypdf raises assorted errors on damaged or unusual files
        raise LoadError(
            source,
            f"cannot extract its text ({type(exc).__name__}: {exc}); repair or re-save it, "
            f"e.g. `qpdf {source} {source}.fixed.pdf`",
        ) from exc
    if not pages:
        raise LoadError(source, "PDF without pages; nothing to index")
    text = PAGE_BREAK.join(pages)
    if not text.strip():
        raise LoadError(source, _OCR_HINT.format(src=source))
    return Document(
        doc_id=source,
        source=source,
        text=text,
        kind="pdf",
        title=title or path.name,
        sha256=text_hash(text),
    )


def _metadata_title(reader: object) -> str | None:
    try:
        meta = getattr(reader, "metadata", None)
        title = getattr(meta, "title", None) if meta is not None else None
    except Exception:  # a broken info dictionary costs the title, not the document
        return None
    return title.strip() or None if isinstance(title, str) else None
