"""The values that flow through ctxr: documents, chunks, contextualised chunks and hits.

All are frozen dataclasses so that pure stages (splitting, analysis, fusion) cannot mutate
what an earlier stage produced.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

# A fixed namespace makes chunk ids deterministic across machines and runs: re-indexing a
# document overwrites its points instead of duplicating them.
CHUNK_NAMESPACE = uuid.UUID("6f1c2a8e-3b7d-5e9f-a1c4-0d2e8b7f6a53")

# rst, notebook and office documents are loaded as Markdown-like text (ctxr.enrich.load).
DocumentKind = Literal[
    "markdown", "code", "text", "html", "pdf", "conversation", "rst", "notebook", "office"
]
# Text that is not a document, skipped unless CTXR_INCLUDE names it (ctxr.enrich.load.kinds).
NonDocument = Literal["markup", "minified", "lock", "data"]
ContextKind = Literal["llm", "outline", "none"]
# How a PDF's pages are joined in its text: a form feed between line breaks, so page numbers
# come from counting form feeds (ctxr.enrich.split.pages) and a page break is a paragraph seam.
PAGE_BREAK = "\n\f\n"


def text_hash(text: str) -> str:
    """SHA-256 of the UTF-8 text, hex; what the manifest and caches key documents by."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_NAMESPACE_BYTES = CHUNK_NAMESPACE.bytes


def chunk_id_for(doc_id: str, index: int) -> str:
    """The deterministic point id of a document's index-th chunk: the UUID version 5 of
    ``f"{doc_id}\\x00{index}"`` in ``CHUNK_NAMESPACE``.

    Written out rather than ``str(uuid.uuid5(...))`` (same string, a third of the time):
    splitting makes one per chunk.
    """
    digest = bytearray(
        hashlib.sha1(
            _NAMESPACE_BYTES + f"{doc_id}\x00{index}".encode(), usedforsecurity=False
        ).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True, slots=True)
class Document:
    """One loaded file. `text` is exactly what chunk offsets refer to."""

    doc_id: str
    source: str
    text: str
    kind: DocumentKind
    title: str
    sha256: str
    language: str | None = None
    # A Markdown file's YAML front matter, scalars as text (ctxr.enrich.load.front_matter);
    # written to each chunk's payload as `meta`, filterable as `meta.KEY`.
    meta: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)
    # The natural language a prose document is written in ("en", "ja": py3langid's ISO 639-1
    # labels), detected when it is split (`ctxr.enrich.language`); None for code or when unsure.
    # Written to each chunk's payload as `natural_language`, filterable.
    natural_language: str | None = None
    # The file's size, times and inode when its text was read (`ctxr.file_stamp`),
    # recorded in the manifest so that a later run passes over it unread while they hold;
    # None for documents not read from a file, or read within a moment of a change.
    file_stamp: tuple[int, int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """A span of a document: ``document.text[start:end] == text`` always holds.

    ``prefix`` carries what is repeated for the chunk's sake (a continued section's heading
    line, a table's header row); it is prepended to the indexed text, never spliced into
    ``text``.
    """

    chunk_id: str
    doc_id: str
    index: int
    text: str
    start: int
    end: int
    token_count: int
    heading_path: tuple[str, ...] = ()  # a section's heading trail, or a code symbol path
    prefix: str = ""
    pages: tuple[int, ...] = ()  # 1-based pages the chunk spans (PDF)
    # The enclosing section (parent-child chunking): a span of the document, returned in
    # place of the small chunk when a search asks to expand hits.
    parent_start: int | None = None
    parent_end: int | None = None


@dataclass(frozen=True, slots=True)
class ContextualChunk:
    """A chunk with the short context that situates it within its document."""

    chunk: Chunk
    context: str
    context_kind: ContextKind

    def indexed_text(self, context_first: bool = True) -> str:
        """The text that is embedded and analysed for BM25: context, prefix, then the chunk
        (or prefix, chunk, then the context, with `context_first=False`)."""
        body = [self.chunk.prefix, self.chunk.text]
        parts = [self.context, *body] if context_first else [*body, self.context]
        return "\n\n".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class RetrieverScore:
    """One retriever's opinion of a hit: its raw score and its 1-based rank."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    score: Annotated[
        float, Field(description="the retriever's own score (cosine, BM25, reranker's)")
    ]
    rank: Annotated[int, Field(description="1-based rank in that retriever's list")]


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result with everything needed to cite it and to see why it came back.

    The one hit model: the search service makes it, and the hit schema (`ctxr.retrieve.hits`,
    ``ctxr.hits/1``) is this class as pydantic reads it, so what a face writes and what the
    Python API returns cannot drift apart. The descriptions below are the schema's.
    """

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    rank: Annotated[int, Field(description="1-based, best first")]
    chunk_id: str
    doc_id: Annotated[str, Field(description="the document's id: its source path as indexed")]
    source: Annotated[str, Field(description="the file, as given to `ctxr index`")]
    start: Annotated[int, Field(description="character offset of `text` in the document's text")]
    end: Annotated[int, Field(description="end offset: document text[start:end] == text")]
    heading_path: Annotated[
        tuple[str, ...], Field(description="section trail, or code symbol path")
    ]
    text: Annotated[str, Field(description="the chunk (or passage, or parent section), verbatim")]
    context: Annotated[str, Field(description="the sentences situating the chunk in its document")]
    score: Annotated[
        float, Field(description="the fused (or reranked) score the hits are sorted by")
    ]
    scores: Annotated[
        Mapping[str, RetrieverScore],
        Field(
            description="each retriever's own score and rank for this chunk (dense, bm25, "
            "bm25_doc, rerank; a reranked hit keeps its fused score and rank as fused)"
        ),
    ] = field(default_factory=dict)
    # Why a hit is not what was asked for, e.g. "rerank failed: timeout" (fused order kept).
    flags: Annotated[
        tuple[str, ...],
        Field(description='why a hit is not as asked, e.g. "rerank failed: timeout"; [] when none'),
    ] = ()
    pages: Annotated[
        tuple[int, ...],
        Field(description="1-based PDF pages the text spans; [] for other kinds"),
    ] = ()
    expanded: Annotated[
        bool, Field(description="text is the hit's whole parent section (expand)")
    ] = False
