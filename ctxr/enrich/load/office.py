"""Word, PowerPoint and Excel files and EPUB books, as Markdown through Microsoft's markitdown.

markitdown (``pip install 'ctxr[office]'``) renders a ``.docx`` through mammoth (Word's heading
styles become ``#`` headings), a ``.pptx`` slide by slide, a ``.xlsx`` sheet by sheet (a ``##``
heading with the sheet's name over a Markdown table) and an ``.epub`` chapter by chapter in
spine order. The document's text is that Markdown, so the Markdown splitter gives every chunk
its heading trail. Each slide becomes a heading of its own, ``# Slide 3: Title`` (from
markitdown's ``<!-- Slide number: 3 -->`` marker and the title that follows it), so a hit on a
slide names its number in the trail.

Each converter is called directly, not through ``MarkItDown()``, which would load its file-type
model (magika) for files whose type the suffix already says. Nothing is downloaded.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from ctxr.enrich.load.walk import display_path
from ctxr.errors import LoadError
from ctxr.types import Document, text_hash

OFFICE_SUFFIXES = frozenset({".docx", ".pptx", ".xlsx", ".epub"})
EXTRA_HINT = "install the office extra: pip install 'ctxr[office]'"
# markitdown's marker for each slide, and the title it writes as "# ..." right after it.
_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->[ \t]*\n(?:# (.*)\n)?", re.MULTILINE)


def load_office(path: Path) -> Document:
    """Convert one Office file or EPUB; raise a `LoadError` naming the file and the fix."""
    source = display_path(path)
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LoadError(source, f"cannot read ({exc.strerror}); check its permissions") from exc
    markdown, title = _convert(raw, suffix, source)
    if suffix == ".pptx":
        markdown = _SLIDE.sub(_slide_heading, markdown)
    text = markdown.strip() + "\n"
    if not text.strip():
        raise LoadError(source, f"no text in this {suffix[1:]} file; nothing to index")
    return Document(
        doc_id=source,
        source=source,
        text=text,
        kind="office",
        title=title or path.name,
        sha256=text_hash(text),
    )


def _convert(raw: bytes, suffix: str, source: str) -> tuple[str, str | None]:
    try:  # imported here: only corpora with Office files pay for it (about 1-2 s)
        from markitdown import StreamInfo
        from markitdown.converters import (
            DocxConverter,
            EpubConverter,
            PptxConverter,
            XlsxConverter,
        )
    except ImportError as exc:
        raise LoadError(source, f"{suffix[1:]} files need markitdown; {EXTRA_HINT}") from exc
    from markitdown import MissingDependencyException

    converters: dict[str, Any] = {  # markitdown's converters take no arguments, typed or not
        ".docx": DocxConverter,
        ".pptx": PptxConverter,
        ".xlsx": XlsxConverter,
        ".epub": EpubConverter,
    }
    converter = converters[suffix]()
    try:
        result = converter.convert(io.BytesIO(raw), StreamInfo(extension=suffix))
    except MissingDependencyException as exc:
        raise LoadError(source, f"{suffix[1:]} support is missing ({exc}); {EXTRA_HINT}") from exc
    except Exception as exc:  # converters raise assorted errors on damaged files
        raise LoadError(
            source,
            f"cannot convert this {suffix[1:]} file ({type(exc).__name__}: {exc}); "
            "open and re-save it, or export it to PDF or Markdown",
        ) from exc
    title = result.title.strip() if isinstance(result.title, str) else None
    return result.markdown, title or None


def _slide_heading(match: re.Match[str]) -> str:
    number, title = match.group(1), (match.group(2) or "").strip()
    return f"# Slide {number}: {title}\n" if title else f"# Slide {number}\n"
