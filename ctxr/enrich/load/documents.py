"""Loading one file as a Document: its kind, its text (decoded, extracted or rendered), its title.

`load_document` raises a `LoadError` naming the file and the fix; the caller records it and
moves past, so one bad file never stops a run.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from ctxr.enrich.headings import heading_text
from ctxr.enrich.load.chat import as_conversation
from ctxr.enrich.load.front_matter import front_matter
from ctxr.enrich.load.html import HTML_SUFFIXES, extract_html
from ctxr.enrich.load.kinds import is_binary_name
from ctxr.enrich.load.notebook import load_notebook
from ctxr.enrich.load.office import OFFICE_SUFFIXES, load_office
from ctxr.enrich.load.pdf import load_pdf
from ctxr.enrich.load.reading import read_regular
from ctxr.enrich.load.rst import RST_SUFFIXES, load_rst
from ctxr.enrich.load.walk import display_path
from ctxr.errors import BinaryFileError, LoadError, UndecodableFileError
from ctxr.types import Document, DocumentKind, text_hash

MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdx", ".mdown"}
CODE_LANGUAGES = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript", ".tsx": "typescript",
    ".java": "java", ".rs": "rust", ".go": "go", ".c": "c", ".h": "c", ".cc": "cpp",
    ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp",
    ".rb": "ruby", ".php": "php", ".swift": "swift", ".kt": "kotlin", ".scala": "scala",
    ".sh": "bash", ".bash": "bash", ".sql": "sql", ".lua": "lua", ".r": "r",
}  # fmt: skip
_SNIFF_BYTES = 8192
# Longest first: the UTF-32-LE mark begins with the UTF-16-LE one.
_UNICODE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# CTXR_MAX_FILE_BYTES's default, for a caller that loads one file outside a corpus run.
DEFAULT_MAX_FILE_BYTES = 20_000_000
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


def kind_of(path: Path) -> tuple[DocumentKind, str | None]:
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown", None
    if suffix in HTML_SUFFIXES:
        return "html", None
    if suffix in RST_SUFFIXES:
        return "rst", None
    if suffix == ".ipynb":
        return "notebook", None
    if suffix in OFFICE_SUFFIXES:
        return "office", None
    if suffix in CODE_LANGUAGES:
        return "code", CODE_LANGUAGES[suffix]
    return "text", None


def load_document(path: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Document:
    """Read one file as UTF-8 text; raise a `LoadError` naming the file and the fix.

    `max_file_bytes` (``CTXR_MAX_FILE_BYTES``) also bounds what an archive (an Office file,
    an EPUB) may unpack to and the text extracted from it."""
    source = display_path(path)  # a name that is not UTF-8 keeps its bytes as escapes
    if path.suffix.lower() == ".pdf":
        return load_pdf(path)  # kind "pdf": the pages' text layer, see ctxr.enrich.load.pdf
    if path.suffix.lower() in OFFICE_SUFFIXES:
        return load_office(path, max_file_bytes)  # kind "office": Markdown through markitdown
    if is_binary_name(path):  # the corpus walk skips these first (ctxr.enrich.load.kinds)
        raise BinaryFileError(source, "binary file type; convert it to text to index it")
    raw = read_regular(path)
    # A UTF-16 or UTF-32 byte-order mark says what the NUL bytes that follow it are.
    encoding = next((name for bom, name in _UNICODE_BOMS if raw.startswith(bom)), "utf-8-sig")
    if encoding == "utf-8-sig" and b"\x00" in raw[:_SNIFF_BYTES]:
        raise BinaryFileError(source, "binary content (NUL bytes); convert it to text to index it")
    try:
        # The codecs drop the byte-order mark, which would otherwise shift every offset.
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UndecodableFileError(
            source,
            f"not valid {encoding.removesuffix('-sig').upper()} (byte {exc.start}); re-encode "
            "it, e.g. "
            f"`iconv -f latin1 -t utf-8 {source} -o {source}.utf8`",
        ) from exc
    if not text.strip():
        raise LoadError(source, "contains only whitespace; nothing to index")
    kind, language = kind_of(path)
    if kind == "rst":
        return load_rst(path, text)
    if kind == "notebook":
        return load_notebook(path, text)
    if kind == "html":  # the chunks store, and their offsets refer to, the extracted text
        page = extract_html(text)
        if not page.text.strip():
            raise LoadError(
                source, "no text once scripts, styles and navigation are dropped; nothing to index"
            )
        return Document(
            doc_id=source, source=source, text=page.text, kind="html",
            title=page.title or path.name, sha256=text_hash(page.text),
        )  # fmt: skip
    if kind == "text" and (conversation := as_conversation(text, path.suffix.lower())):
        text, kind = conversation, "conversation"  # a JSON export is rendered as turns
    return Document(
        doc_id=source,
        source=source,
        text=text,
        kind=kind,
        title=_title(text, kind, path),
        sha256=text_hash(text),
        language=language,
        meta=front_matter(text) if kind == "markdown" else {},
    )


def _title(text: str, kind: DocumentKind, path: Path) -> str:
    if kind == "markdown":
        match = _H1.search(text)
        if match:
            return heading_text(match.group(1)) or path.name
    return path.name
