"""The embedder's input limit as a hard cap on chunks.

Chunks are sized in tiktoken tokens, but an embedder reads its own word pieces and silently
drops what lies past its input limit (256 for the local MiniLM). A tiktoken budget that fits
English prose can be twice over in word pieces on CJK text, long identifiers or minified code.
``cap_chunks`` is a post-pass over one document's chunks: a chunk that does not ``fit`` is split
again on its own span with the same recursive seams as the splitters (paragraphs, lines,
sentences; blocks and lines for code; then token windows) and a smaller tiktoken budget,
until every piece fits. Pieces keep the chunk's heading trail, prefix and parent span; indexes
and ids are renumbered in document order. A run that cannot be split further (a few tokens)
and still does not fit is kept and reported, and so is a chunk whose prefix alone exceeds the
limit (a heading of hundreds of words): every piece would carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ctxr.enrich.split.pages import with_pages
from ctxr.enrich.split.recursive import CODE_LEVELS, PROSE_LEVELS, split_span
from ctxr.enrich.split.sizing import MIN_MAX_TOKENS, Sized, Sizer
from ctxr.tokens import DEFAULT_ENCODING
from ctxr.types import Chunk, Document, chunk_id_for

__all__ = ["CapResult", "cap_chunks", "embedded_size"]

# Re-split pieces aim a little under the limit: word pieces per tiktoken token vary along a
# text, and one more round costs more than a slightly smaller piece.
_AIM = 0.95


@dataclass(slots=True)
class CapResult:
    chunks: list[Chunk]
    resplit: int = 0  # chunks that were over the cap and split again
    unsplittable: list[Chunk] = field(default_factory=list)  # kept although over the cap


def embedded_size(count_tokens: Callable[[str], int]) -> Callable[[Chunk], int]:
    """A chunk's size in the embedder's tokens without its context: its prefix and text,
    joined as ``ContextualChunk.indexed_text`` joins them."""

    def size(chunk: Chunk) -> int:
        return count_tokens(f"{chunk.prefix}\n\n{chunk.text}" if chunk.prefix else chunk.text)

    return size


def cap_chunks(
    doc: Document,
    chunks: list[Chunk],
    size: Callable[[Chunk], int],
    limit: int,
    *,
    encoding: str = DEFAULT_ENCODING,
) -> CapResult:
    """``chunks`` with every chunk whose ``size`` exceeds ``limit`` split until its pieces fit.

    ``limit`` is the embedder's input less what is kept for the context."""
    result = CapResult([])
    sizer: Sizer | None = None
    out: list[Chunk] = []
    for chunk in chunks:
        measured = size(chunk)
        if measured <= limit:
            out.append(chunk)
            continue
        if sizer is None:
            sizer = Sizer(doc.text, encoding)
        result.resplit += 1
        out.extend(_refit(doc, sizer, chunk, measured, size, limit, result))
    if not result.resplit:
        result.chunks = chunks
        return result
    renumbered = [
        replace(c, index=i, chunk_id=chunk_id_for(doc.doc_id, i)) for i, c in enumerate(out)
    ]
    result.chunks = with_pages(doc.text, renumbered) if doc.kind == "pdf" else renumbered
    return result


def _refit(
    doc: Document,
    sizer: Sizer,
    chunk: Chunk,
    measured: int,
    size: Callable[[Chunk], int],
    limit: int,
    result: CapResult,
) -> list[Chunk]:
    tokens = chunk.token_count
    # A prefix (a continued section's heading lines) that alone exceeds the limit is carried
    # by every piece: splitting the text would only make hundreds of pieces, each still over.
    if tokens <= MIN_MAX_TOKENS or limit <= 0 or size(replace(chunk, text="")) >= limit:
        result.unsplittable.append(chunk)
        return [chunk]
    # The largest tiktoken budget the estimate allows (the fewest pieces), always below the
    # chunk's own count, so that every round makes the pieces smaller; a piece that is still
    # over is split again on its own.
    budget = max(MIN_MAX_TOKENS, min(int(tokens * limit / measured * _AIM), tokens - 1))
    levels = CODE_LEVELS if doc.kind == "code" else PROSE_LEVELS
    out: list[Chunk] = []
    for piece in split_span(sizer, Sized(chunk.start, chunk.end, tokens), levels, budget):
        part = replace(
            chunk,
            text=doc.text[piece.start : piece.end],
            start=piece.start,
            end=piece.end,
            token_count=piece.tokens,
        )
        part_size = size(part)
        if part_size <= limit:
            out.append(part)
        else:
            out.extend(_refit(doc, sizer, part, part_size, size, limit, result))
    return out
