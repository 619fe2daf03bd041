"""Walking a corpus and loading its files as Documents.

One bad file never stops a run: `walk` yields skips as values (hidden, ignored, too large) and
`load_document` raises a `LoadError` that the caller records and moves past.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

from ctxr.enrich.html import HTML_SUFFIXES, extract_html
from ctxr.enrich.pdf import load_pdf
from ctxr.enrich.split.conversation import as_conversation
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
# Files whose suffix alone says they are not text; sniffing still catches the rest.
BINARY_SUFFIXES = {
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".zip", ".gz", ".tar", ".bz2",
    ".xz", ".7z", ".so", ".dylib", ".dll", ".exe", ".bin", ".onnx", ".pyc", ".whl", ".class",
    ".jar", ".woff", ".woff2", ".ttf", ".mp3", ".mp4", ".wav", ".sqlite", ".db", ".parquet",
}  # fmt: skip
IGNORE_FILES = (".gitignore", ".ctxrignore")
_SNIFF_BYTES = 8192
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file the walk passed over, and why (counted in the run's notice)."""

    path: str
    reason: str


def _ignore_spec(root: Path) -> pathspec.GitIgnoreSpec | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        ignore_file = root / name
        if ignore_file.is_file():
            lines.extend(ignore_file.read_text(encoding="utf-8", errors="replace").splitlines())
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def walk(paths: Sequence[str | Path], max_file_bytes: int) -> Iterator[Path | Skipped]:
    """Every candidate file under `paths`, in a stable order, or a `Skipped` for each excluded one.

    A path named explicitly is always considered, even if hidden; inside directories, hidden
    entries and those matched by the directory's .gitignore/.ctxrignore are skipped.
    """
    for given in paths:
        root = Path(given)
        if root.is_file():
            yield _size_checked(root, max_file_bytes)
            continue
        if not root.is_dir():
            yield Skipped(str(given), "no such file or directory")
            continue
        spec = _ignore_spec(root)
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            rel_dir = here.relative_to(root)
            kept_dirs = []
            for name in sorted(dirnames):
                rel = (rel_dir / name).as_posix() + "/"
                if name.startswith("."):
                    yield Skipped(str(here / name), "hidden directory")
                elif spec is not None and spec.match_file(rel):
                    yield Skipped(str(here / name), "ignored directory")
                else:
                    kept_dirs.append(name)
            dirnames[:] = kept_dirs  # os.walk descends only into what we keep
            for name in sorted(filenames):
                path = here / name
                if name.startswith("."):
                    yield Skipped(str(path), "hidden file")
                elif spec is not None and spec.match_file((rel_dir / name).as_posix()):
                    yield Skipped(str(path), "ignored file")
                else:
                    yield _size_checked(path, max_file_bytes)


def _size_checked(path: Path, max_file_bytes: int) -> Path | Skipped:
    try:
        size = path.stat().st_size
    except OSError as exc:
        return Skipped(str(path), f"cannot stat: {exc.strerror}")
    if size > max_file_bytes:
        return Skipped(
            str(path),
            f"larger than CTXR_MAX_FILE_BYTES ({size:,} > {max_file_bytes:,} bytes); "
            "raise the limit to include it",
        )
    if size == 0:
        return Skipped(str(path), "empty file")
    return path


def kind_of(path: Path) -> tuple[DocumentKind, str | None]:
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown", None
    if suffix in HTML_SUFFIXES:
        return "html", None
    if suffix in CODE_LANGUAGES:
        return "code", CODE_LANGUAGES[suffix]
    return "text", None


def load_document(path: Path) -> Document:
    """Read one file as UTF-8 text; raise a `LoadError` naming the file and the fix."""
    source = path.as_posix()
    if path.suffix.lower() == ".pdf":
        return load_pdf(path)  # kind "pdf": the pages' text layer, see ctxr.enrich.pdf
    if path.suffix.lower() in BINARY_SUFFIXES:
        raise BinaryFileError(source, "binary file type; convert it to text to index it")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LoadError(source, f"cannot read ({exc.strerror}); check its permissions") from exc
    if b"\x00" in raw[:_SNIFF_BYTES]:
        raise BinaryFileError(source, "binary content (NUL bytes); convert it to text to index it")
    try:
        # utf-8-sig drops a byte-order mark, which would otherwise shift every offset by one.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UndecodableFileError(
            source,
            f"not valid UTF-8 (byte {exc.start}); re-encode it, e.g. "
            f"`iconv -f latin1 -t utf-8 {source} -o {source}.utf8`",
        ) from exc
    if not text.strip():
        raise LoadError(source, "contains only whitespace; nothing to index")
    kind, language = kind_of(path)
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
    )


def _title(text: str, kind: DocumentKind, path: Path) -> str:
    if kind == "markdown":
        match = _H1.search(text)
        if match:
            return match.group(1).strip()
    return path.name
