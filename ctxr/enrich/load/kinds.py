"""Which files are documents: binaries and text that is not prose are passed over, counted.

Two kinds of file are not worth indexing, and neither is a failure:

* **binaries** (images, fonts, audio, video, archives, compiled code, model weights): known by
  their suffix; never loaded, never listed one per line (``ctxr index --verbose`` lists them).
* **text that is not a document**, skipped by default and included by name with
  ``CTXR_INCLUDE`` / ``ctxr index --include NAME``:

  - ``markup``: SVG, and XML whose characters are nearly all tags and attributes (a drawio
    diagram, an XSD), recognised by suffix and then by content;
  - ``minified``: ``*.min.js`` / ``*.min.css``, and JavaScript or CSS whose lines are far longer
    than anything a person writes;
  - ``lock``: package manager lock files (``package-lock.json``, ``poetry.lock``,
    ``Cargo.lock``, ``yarn.lock``, ...), by name;
  - ``data``: CSV/TSV/JSON-lines files, and JSON that is not a chat export, once larger than
    ``DATA_DUMP_BYTES``: rows of values, not prose.

Each skip's reason is one of a few fixed texts (``REASONS``), so that a summary can count them
in one line.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Final

BINARY_SUFFIXES: Final = frozenset({
    # images
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".bmp", ".tif", ".tiff", ".psd", ".heic",
    ".avif", ".icns", ".xcf", ".ai", ".eps", ".raw", ".cr2", ".nef",
    # fonts (AFM: font metrics, as text)
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".pfb", ".pfa", ".pfm", ".afm",
    # audio and video
    ".mp3", ".wav", ".flac", ".ogg", ".oga", ".m4a", ".aac", ".opus", ".wma", ".mid", ".midi",
    ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".wmv", ".flv", ".mpg", ".mpeg",
    # archives and disk images
    ".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".zst", ".7z", ".rar", ".lz", ".lzma",
    ".iso", ".dmg", ".img", ".deb", ".rpm", ".apk", ".cab", ".msi",
    # compiled code, databases, model weights, serialised data
    ".so", ".dylib", ".dll", ".exe", ".bin", ".o", ".a", ".lib", ".obj", ".pyc", ".pyo",
    ".whl", ".egg", ".class", ".jar", ".war", ".wasm", ".onnx", ".pt", ".pth", ".ckpt",
    ".safetensors", ".gguf", ".h5", ".hdf5", ".npy", ".npz", ".pkl", ".pickle", ".joblib",
    ".sqlite", ".sqlite3", ".db", ".parquet", ".feather", ".arrow", ".avro", ".orc",
    ".doc", ".xls", ".ppt", ".odt", ".ods", ".odp", ".key", ".numbers", ".pages",
})  # fmt: skip

BINARY_REASON: Final = "binary (image, font, audio, video, archive or compiled file)"
REASONS: Final[dict[str, str]] = {  # one per ctxr.types.NonDocument
    "markup": "markup without prose (SVG, XML)",
    "minified": "minified code",
    "lock": "lock file",
    "data": "data dump (CSV, JSON lines, large JSON)",
}

LOCK_FILES: Final = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
    "poetry.lock", "pipfile.lock", "pdm.lock", "uv.lock", "cargo.lock", "gemfile.lock",
    "composer.lock", "go.sum", "flake.lock", "packages.lock.json", "podfile.lock",
    "mix.lock", "pubspec.lock", "gradle.lockfile",
})  # fmt: skip
_MARKUP_SUFFIXES: Final = frozenset({".svg", ".svgz", ".drawio"})
_XML_SUFFIXES: Final = frozenset({".xml", ".xsd", ".xsl", ".xslt", ".plist", ".rdf", ".kml"})
_MINIFIABLE_SUFFIXES: Final = frozenset({".js", ".mjs", ".cjs", ".css"})
_DATA_SUFFIXES: Final = frozenset({".csv", ".tsv", ".jsonl", ".ndjson"})
# Rows of values worth a megabyte are a data set, not something one reads; a chat export is
# recognised by its keys and stays a document (ctxr.enrich.load.chat).
DATA_DUMP_BYTES: Final = 1_000_000
_SNIFF_BYTES: Final = 16_384
# Hand-written code and CSS keep lines under ~120 characters; a minifier writes lines of
# thousands. 300 on average over the first 16 KB leaves room for long string literals.
_MINIFIED_MEAN_LINE: Final = 300
# In prose-bearing XML (DocBook, XHTML, a feed) a third or more of the characters are text
# between tags; in a diagram or a schema, a few percent.
_MARKUP_TEXT_SHARE: Final = 0.2
_TAG = re.compile(r"<[^>]*>", re.DOTALL)
_CHAT_KEYS = re.compile(r'"(?:role|author|speaker|messages|mapping)"\s*:')


def is_binary_name(path: Path) -> bool:
    return path.suffix.lower() in BINARY_SUFFIXES


def non_document(path: Path, include: Collection[str] = ()) -> str | None:
    """Why `path` is not a document to index (a `REASONS` key or "binary"), or None if it is.

    Reads at most the first 16 KB, and only of the suffixes that need a look at the content.
    """
    if is_binary_name(path):
        return "binary"
    name, suffix = path.name.lower(), path.suffix.lower()
    found = _by_name(name, suffix) or _by_content(path, suffix)
    return found if found is not None and found not in include else None


def skip_reason(kind: str) -> str:
    """The fixed text a `Skipped` carries for a kind `non_document` named."""
    if kind == "binary":
        return BINARY_REASON
    return f"{REASONS[kind]} (--include {kind})"


def is_kind_skip(reason: str) -> bool:
    """Whether a `Skipped` reason is one `skip_reason` gave (a binary or a non-document)."""
    return reason == BINARY_REASON or any(reason.startswith(text) for text in REASONS.values())


def summarize_skips(reasons: Iterable[str]) -> str:
    """One line for a run's skips: a count per reason, and how to include what can be.

    A reason is counted by its words before any parenthesis or semicolon, so that reasons
    which name a size or a hint per file still count together.
    """
    counts: dict[str, int] = {}
    includable: set[str] = set()
    for reason in reasons:
        label = reason.split(" (", 1)[0].split(";", 1)[0]
        counts[label] = counts.get(label, 0) + 1
        includable.update(kind for kind, text in REASONS.items() if reason.startswith(text))
    total = sum(counts.values())
    line = f"skipped {total} path{'s' * (total != 1)}: " + ", ".join(
        f"{n} {label}" for label, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )
    if includable:
        names = ",".join(sorted(includable))
        line += f" (to index those: --include {names} or CTXR_INCLUDE={names})"
    return line


def _by_name(name: str, suffix: str) -> str | None:
    if name in LOCK_FILES:
        return "lock"
    if suffix in _MARKUP_SUFFIXES:
        return "markup"
    if suffix in _MINIFIABLE_SUFFIXES and name.removesuffix(suffix).endswith(".min"):
        return "minified"
    return None


def _by_content(path: Path, suffix: str) -> str | None:
    looks = suffix in _XML_SUFFIXES or suffix in _MINIFIABLE_SUFFIXES
    data_like = suffix in _DATA_SUFFIXES or suffix == ".json"
    if not looks and not data_like:
        return None
    try:
        size = path.stat().st_size
        if data_like and size <= DATA_DUMP_BYTES:
            return None
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES).decode("utf-8", "replace")
    except OSError:
        return None  # the loader reports what is wrong with the file
    if suffix in _XML_SUFFIXES:
        return "markup" if _text_share(head) < _MARKUP_TEXT_SHARE else None
    if suffix in _MINIFIABLE_SUFFIXES:
        return "minified" if _mean_line(head) > _MINIFIED_MEAN_LINE else None
    if suffix != ".csv" and suffix != ".tsv" and _CHAT_KEYS.search(head):
        return None
    return "data"


def _text_share(xml: str) -> float:
    text = _TAG.sub("", xml)
    words = sum(len(word) for word in text.split())
    return words / max(1, len(xml.strip()))


def _mean_line(text: str) -> float:
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(map(len, lines)) / max(1, len(lines))
