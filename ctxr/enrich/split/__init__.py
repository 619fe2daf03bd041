"""Token-sized, structure-aware splitting of a Document into Chunks.

``split_document`` picks the strategy by ``doc.kind``:

* ``markdown``: sections by heading, merged while small, split by blocks and lines when large
  (see ``ctxr.enrich.split.markdown``); no overlap by default, since sections are natural units.
* ``html``: the Markdown splitting of the page's extracted text (see ``ctxr.enrich.load.html``);
  so are ``rst``, ``notebook`` and ``office`` (their loaders render Markdown-like text).
* ``text``: recursive prose splitting by paragraphs, lines, sentences and words, with an
  overlap of 10% of ``max_tokens`` by default (see ``ctxr.enrich.split.recursive``).
* ``code``: syntax-tree boundaries (functions, classes, methods) with tree-sitter for the
  languages in ``CODE_SPLIT_LANGUAGES`` (see ``ctxr.enrich.split.code``); other languages, or
  a grammar that fails to load, get the same recursion with code seams (blank lines between
  top-level definitions, blank lines, lines); no overlap by default, since repeated code
  confuses more than it helps.
* ``pdf``: the prose splitting of the pages' text (10% overlap); each chunk's ``pages`` lists
  the pages it touches (see ``ctxr.enrich.load.pdf``).
* ``conversation``: whole turns packed per chunk, an over-long turn split as prose (see
  ``ctxr.enrich.split.conversation``); no overlap by default.

Guarantees, for every chunk: ``doc.text[start:end] == text``; the text is trimmed and never
empty; ``token_count`` is its exact count and never exceeds ``max_tokens``; ids are
``chunk_id_for(doc_id, index)`` with indexes 0..n-1 in document order; and the chunks together
hold every non-whitespace character of the document. Offsets are Python ``str`` indices.

Budgets are tiktoken tokens; an embedder reads its own word pieces. ``ctxr.enrich.split.cap``
splits further what an embedder would truncate (the index builder applies it).
"""

from __future__ import annotations

from collections.abc import Callable

from ctxr.enrich.split.code import split_code
from ctxr.enrich.split.conversation import split_conversation
from ctxr.enrich.split.markdown import split_markdown
from ctxr.enrich.split.pages import with_pages
from ctxr.enrich.split.recursive import CODE_LEVELS, PROSE_LEVELS, add_overlap, split_span
from ctxr.enrich.split.sizing import MIN_MAX_TOKENS, Piece, Sizer, trim
from ctxr.errors import ConfigError
from ctxr.tokens import DEFAULT_ENCODING
from ctxr.types import Chunk, Document, DocumentKind, chunk_id_for

__all__ = ["MARKDOWN_LIKE", "default_overlap", "split_document"]

# Kinds whose loaders render Markdown-like text: HTML, reStructuredText, notebooks, Office/EPUB.
MARKDOWN_LIKE: frozenset[DocumentKind] = frozenset(
    {"markdown", "html", "rst", "notebook", "office"}
)


def default_overlap(kind: DocumentKind, max_tokens: int) -> int:
    """The overlap used when none is given: 10% of the budget for prose, none otherwise."""
    return max_tokens // 10 if kind in ("text", "pdf") else 0


def split_document(
    doc: Document,
    *,
    max_tokens: int = 256,
    overlap_tokens: int | None = None,
    encoding: str = DEFAULT_ENCODING,
    fits: Callable[[str], bool] | None = None,
) -> list[Chunk]:
    """Split ``doc`` into chunks of at most ``max_tokens`` tokens along its own structure.

    ``fits`` says whether an embedded text (a chunk's prefix, a blank line, its text) fits the
    embedder's input; the code splitter then sizes chunks to it (see ``split_code``)."""
    if max_tokens < MIN_MAX_TOKENS:
        raise ConfigError(f"max_tokens must be at least {MIN_MAX_TOKENS}, got {max_tokens}")
    overlap = default_overlap(doc.kind, max_tokens) if overlap_tokens is None else overlap_tokens
    if not 0 <= overlap <= max_tokens // 2:
        raise ConfigError(
            f"overlap_tokens must be between 0 and half of max_tokens ({max_tokens // 2}), "
            f"got {overlap}"
        )
    sizer = Sizer(doc.text, encoding)
    if doc.kind in MARKDOWN_LIKE:  # loaded as Markdown-like text (ctxr.enrich.load)
        pieces = split_markdown(sizer, max_tokens, overlap)
    elif doc.kind == "conversation":
        pieces = split_conversation(sizer, max_tokens, overlap)
    elif doc.kind == "code" and (
        code := split_code(sizer, doc.language, doc.source, max_tokens, overlap, fits=fits)
    ):
        pieces = code
    else:
        pieces = _split_plain(sizer, doc.kind, max_tokens, overlap)
    chunks = [
        Chunk(
            chunk_id=chunk_id_for(doc.doc_id, index),
            doc_id=doc.doc_id,
            index=index,
            text=doc.text[piece.span.start : piece.span.end],
            start=piece.span.start,
            end=piece.span.end,
            token_count=piece.span.tokens,
            heading_path=piece.heading_path,
            prefix=piece.prefix,
        )
        for index, piece in enumerate(pieces)
    ]
    return with_pages(doc.text, chunks) if doc.kind == "pdf" else chunks


def _split_plain(sizer: Sizer, kind: DocumentKind, max_tokens: int, overlap: int) -> list[Piece]:
    whole = trim(sizer.text, 0, len(sizer.text))
    if whole is None:
        return []
    span = sizer.sized(*whole)
    if span.tokens <= max_tokens:
        return [Piece(span, ())]
    levels = CODE_LEVELS if kind == "code" else PROSE_LEVELS
    # Pack to leave room for the overlap that each chunk then takes from the one before it.
    chunks = split_span(sizer, span, levels, max_tokens - overlap)
    return [Piece(chunk, ()) for chunk in add_overlap(sizer, chunks, overlap, max_tokens)]
