"""The payload of a point: the one schema the writer fills and the search reads back.

`ChunkPayload` is that schema, typed: the writer builds it with `chunk_payload`, the stores
return it on every hit, the search reads it by these keys (mypy checks them), and the filter
language (`ctxr.index.filters`) names a subset of them. Fields marked `NotRequired` were added
after the first indexes were written; readers give them a default, so old indexes still read.
`KEYWORD_FIELDS` get a keyword index in every store.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Final, NotRequired, TypedDict

from ctxr.types import ContextualChunk, Document

SPACE_AFTER_MAX = 256  # the longest whitespace run the writer stores after a chunk
# Payload fields we filter on get a keyword index, so deleting a document's points stays cheap
# and a search filter on them is planned from the index.
KEYWORD_FIELDS: Final = (
    *("doc_id", "source", "kind", "language", "natural_language"),
    *("source_dirs", "source_dir", "source_ext"),
)

_SPACE = re.compile(r"\s*")


class ChunkPayload(TypedDict):
    doc_id: str
    source: str
    # What directory and glob filters on `source` match (see `source_fields`).
    source_dirs: NotRequired[list[str]]
    source_dir: NotRequired[str]
    source_ext: NotRequired[str]
    title: str
    kind: str
    language: str | None
    natural_language: NotRequired[str | None]  # a prose document's, detected (`Document`)
    doc_sha256: str
    index: int
    start: int
    end: int
    space_after: NotRequired[str]  # lets merged passages stay exact
    token_count: int
    heading_path: list[str]
    prefix: NotRequired[str]
    pages: NotRequired[list[int]]
    parent_start: NotRequired[int | None]
    parent_end: NotRequired[int | None]
    text: str
    context: str
    context_kind: str
    # A Markdown file's front matter (`Document.meta`); filters name its keys as `meta.KEY`.
    meta: NotRequired[dict[str, str | list[str]]]


def chunk_payload(document: Document, situated: ContextualChunk) -> ChunkPayload:
    payload = _fields(document, situated)
    if document.meta:
        payload["meta"] = {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in document.meta.items()
        }
    return payload


def _fields(document: Document, situated: ContextualChunk) -> ChunkPayload:
    chunk = situated.chunk
    where = source_fields(document.source)  # named, not **-unpacked: mypy then checks each key
    return {
        "doc_id": document.doc_id,
        "source": document.source,
        "source_dirs": where["source_dirs"],
        "source_dir": where["source_dir"],
        "source_ext": where["source_ext"],
        "title": document.title,
        "kind": document.kind,
        "language": document.language,
        "natural_language": document.natural_language,
        "doc_sha256": document.sha256,
        "index": chunk.index,
        "start": chunk.start,
        "end": chunk.end,
        "space_after": space_after(document.text, chunk.end),
        "token_count": chunk.token_count,
        "heading_path": list(chunk.heading_path),
        "prefix": chunk.prefix,
        "pages": list(chunk.pages),
        "parent_start": chunk.parent_start,
        "parent_end": chunk.parent_end,
        "text": chunk.text,
        "context": situated.context,
        "context_kind": situated.context_kind,
    }


def space_after(text: str, end: int) -> str:
    """The whitespace run that starts at `end` in `text`, at most SPACE_AFTER_MAX characters."""
    found = _SPACE.match(text, end, min(len(text), end + SPACE_AFTER_MAX))
    return found.group() if found else ""


class SourceFields(TypedDict):
    source_dirs: list[str]  # every ancestor directory
    source_dir: str  # the parent, "" at the top
    source_ext: str


def source_fields(source: str) -> SourceFields:
    """The payload fields that directory and glob filters on `source` match."""
    path = PurePosixPath(source)
    parent = path.parent
    dirs = [str(p) for p in reversed(path.parents) if str(p) not in (".", "/")]
    return {
        "source_dirs": dirs,
        "source_dir": "" if str(parent) == "." else str(parent),
        "source_ext": path.suffix,
    }
