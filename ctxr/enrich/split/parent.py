"""Parent-child chunking: small chunks are indexed, their enclosing section is returned.

The document is split twice with the structure splitter (``split_document``): once into
parents of at most ``parent_tokens`` tokens without overlap, once into children of at most
``max_tokens`` tokens. A child never crosses a parent boundary: a child that does is cut there
into one piece per parent (each piece trimmed and counted again, and split further in the rare
case a piece counts over the budget on its own), and an overlap piece that lies wholly inside
the piece before it is dropped. Each child records its parent's span in ``parent_start`` /
``parent_end``; only children are indexed, with ids ``chunk_id_for(doc_id, index)`` over the
children in document order, so every invariant of ``split_document`` holds for them.

A child keeps the heading path and prefix the structure splitter gave it. A piece cut from a
child's tail starts where the child did not: it takes its parent's heading path and prefix if
it starts where its parent does, and otherwise the child's heading path and no prefix.
"""

from __future__ import annotations

from ctxr.enrich.split import split_document
from ctxr.enrich.split.sizing import Sized, Sizer, trim, window_split
from ctxr.errors import ConfigError
from ctxr.tokens import DEFAULT_ENCODING
from ctxr.types import Chunk, Document, chunk_id_for

__all__ = ["split_parent_child"]


def split_parent_child(
    doc: Document,
    *,
    max_tokens: int = 256,
    parent_tokens: int = 1024,
    overlap_tokens: int | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> list[Chunk]:
    """Children of at most ``max_tokens`` tokens, each inside one parent section."""
    if parent_tokens < max_tokens:
        raise ConfigError(
            f"parent_tokens ({parent_tokens}) must be at least chunk_tokens ({max_tokens})"
        )
    parents = split_document(doc, max_tokens=parent_tokens, overlap_tokens=0, encoding=encoding)
    children = split_document(
        doc, max_tokens=max_tokens, overlap_tokens=overlap_tokens, encoding=encoding
    )
    sizer = Sizer(doc.text, encoding)
    # (start, end, tokens, heading path, prefix, child, parent) of every child piece.
    found: list[tuple[int, int, int, tuple[str, ...], str, Chunk, Chunk]] = []
    last_in: dict[int, tuple[int, int]] = {}  # a parent's start -> its latest piece's span
    p = 0
    for child in children:
        while p < len(parents) and parents[p].end <= child.start:
            p += 1
        q = p
        while q < len(parents) and parents[q].start < child.end:
            parent = parents[q]
            q += 1
            span = trim(doc.text, max(child.start, parent.start), min(child.end, parent.end))
            if span is None:
                continue
            last = last_in.get(parent.start)
            if last is not None and last[0] <= span[0] and span[1] <= last[1]:
                continue  # overlap wholly inside the piece before it
            last_in[parent.start] = span
            if span[0] == child.start:
                heading_path, prefix = child.heading_path, child.prefix
            elif span[0] == parent.start:
                heading_path, prefix = parent.heading_path, parent.prefix
            else:
                heading_path, prefix = child.heading_path, ""
            if span == (child.start, child.end):
                pieces = [Sized(child.start, child.end, child.token_count)]
            else:
                sized = sizer.sized(*span)
                pieces = (
                    [sized]
                    if sized.tokens <= max_tokens
                    else window_split(sizer, span[0], span[1], max_tokens)
                )
            for n, (start, end, tokens) in enumerate(pieces):
                found.append(
                    (start, end, tokens, heading_path, prefix if n == 0 else "", child, parent)
                )
    found.sort(key=lambda piece: (piece[0], piece[1]))
    return [
        Chunk(
            chunk_id=chunk_id_for(doc.doc_id, index),
            doc_id=doc.doc_id,
            index=index,
            text=doc.text[start:end],
            start=start,
            end=end,
            token_count=tokens,
            heading_path=heading_path,
            prefix=prefix,
            pages=child.pages,
            parent_start=parent.start,
            parent_end=parent.end,
        )
        for index, (start, end, tokens, heading_path, prefix, child, parent) in enumerate(found)
    ]
