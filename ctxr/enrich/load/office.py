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

Every one of these files is a zip archive, and a small one can unpack to gigabytes (a 1.2 MB
``.docx`` whose ``document.xml`` is 300 MB took minutes and gigabytes to convert). Before
anything is extracted, the archive's own directory is read: a file whose members declare more
than ``CTXR_MAX_FILE_BYTES`` in all, or a large member that expands more than
`MAX_RATIO`:1, is skipped by name as a zip bomb. The declared sizes bind: Python's zipfile,
which every converter reads through, stops each member at its declared size. The Markdown
extracted is held to the same limit.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

from ctxr.enrich.load.reading import read_regular
from ctxr.enrich.load.walk import display_path
from ctxr.errors import LoadError, SkipFileError
from ctxr.types import Document, text_hash

OFFICE_SUFFIXES = frozenset({".docx", ".pptx", ".xlsx", ".epub"})
EXTRA_HINT = "install the office extra: pip install 'ctxr[office]'"
# markitdown's marker for each slide, and the title it writes as "# ..." right after it.
_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->[ \t]*\n(?:# (.*)\n)?", re.MULTILINE)
# XML compresses about 5-20:1 and media not at all; past this a member is not a document.
MAX_RATIO = 100
# Members smaller than this may expand as they like: a small part is no bomb.
RATIO_FLOOR = 1 << 20


def load_office(path: Path, max_file_bytes: int) -> Document:
    """Convert one Office file or EPUB; raise a `LoadError` naming the file and the fix, a
    `SkipFileError` for an archive that would unpack past `max_file_bytes`."""
    source = display_path(path)
    suffix = path.suffix.lower()
    raw = read_regular(path)
    check_unpacked(raw, source, max_file_bytes)
    markdown, title = _convert(raw, suffix, source)
    if len(markdown) > max_file_bytes:  # characters: at least one byte each
        raise SkipFileError(
            source,
            f"text extracted is larger than CTXR_MAX_FILE_BYTES ({len(markdown):,} characters "
            f"> {max_file_bytes:,}); raise the limit to include it",
        )
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


def check_unpacked(raw: bytes, source: str, max_file_bytes: int) -> None:
    """Raise a `SkipFileError` if the zip archive `raw` would unpack past `max_file_bytes` in
    all, or has a member of `RATIO_FLOOR` bytes or more that expands past `MAX_RATIO`:1. Only
    the archive's directory is read; a file that is no zip is left to the converter to name."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    total = 0
    for member in members:
        total += member.file_size
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size >= RATIO_FLOOR and ratio > MAX_RATIO:
            raise SkipFileError(
                source,
                f"zip bomb; its member {member.filename} expands {ratio:,.0f}:1 "
                f"({member.file_size:,} bytes from {member.compress_size:,}), past "
                f"{MAX_RATIO}:1; nothing was extracted",
            )
    if total > max_file_bytes:
        raise SkipFileError(
            source,
            f"unpacks past CTXR_MAX_FILE_BYTES ({total:,} > {max_file_bytes:,} bytes); "
            "raise the limit to include it",
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
