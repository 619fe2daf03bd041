"""Windows of long documents: the outline plus one fixed block of text per group of chunks.

A document longer than the token budget cannot be sent whole. Each chunk is sent with a window:
the document's outline (title, path, its heading trail as a list) followed by the block of the
document that holds the chunk. Blocks are FIXED consecutive spans (cut at chunk starts, so no
chunk straddles two blocks; each at most the budget left after the outline), not sliding windows
centred on each chunk, so every chunk of one block sends the same bytes: one cached prefix per
block. The queue treats each block as its own document for the "first request writes the cache"
rule.

Blocks depend only on the text, the chunks (deterministic for a given chunking recipe), the
budget and the token counter, so a rerun rebuilds the same windows and hits the same provider
cache and the same response cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxr.types import Chunk, Document

# The outline may take at most this share of the budget; the rest is the block.
OUTLINE_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class Block:
    index: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Window:
    """What is sent as `SituateRequest.document` for `chunks`: one shared prefix."""

    text: str
    block: Block | None  # None: the whole document fits, no window
    chunks: tuple[Chunk, ...]


def plan_blocks(
    text: str, chunks: Sequence[Chunk], budget: int, count_tokens: Callable[[str], int]
) -> list[tuple[Block, list[Chunk]]]:
    """Cut `text` into consecutive blocks of at most `budget` tokens, each cut at a chunk's
    start, so that every chunk lies wholly inside its block. Chunk k owns the text from its
    start to the next chunk's start (the first also owns what precedes it, the last what
    follows); a block extends past its cut only by its chunks' overlap into the next block."""
    ordered = sorted(chunks, key=lambda c: (c.start, c.index))
    if not ordered:
        return []
    cuts = [0, *(c.start for c in ordered[1:]), len(text)]
    groups: list[list[int]] = []
    used = 0
    for k, chunk in enumerate(ordered):
        cost = count_tokens(text[cuts[k] : cuts[k + 1]])
        tail_end = max(chunk.end, cuts[k + 1])
        tail = count_tokens(text[cuts[k + 1] : tail_end]) if tail_end > cuts[k + 1] else 0
        if groups and used + cost + tail <= budget:
            groups[-1].append(k)
            used += cost
        else:
            groups.append([k])
            used = cost
    blocks: list[tuple[Block, list[Chunk]]] = []
    for group in groups:
        members = [ordered[k] for k in group]
        start = cuts[group[0]]
        end = max(cuts[group[-1] + 1], *(c.end for c in members))
        size = count_tokens(text[start:end])
        if size > budget:
            # One chunk with more text than the budget: keep what fits, from its start.
            end = start + max(1, (end - start) * budget // size)
        blocks.append((Block(len(blocks), start, end), members))
    return blocks


def outline_text(
    document: Document, chunks: Sequence[Chunk], budget: int, count_tokens: Callable[[str], int]
) -> str:
    """The document's title and path and its heading tree, cut to `budget` tokens."""
    lines = [f"Document: {document.title} ({document.source})", "Outline:"]
    used = count_tokens("\n".join(lines))
    seen: set[tuple[str, ...]] = set()
    for chunk in chunks:
        path = chunk.heading_path
        for depth in range(len(path)):
            prefix = path[: depth + 1]
            if prefix in seen:
                continue
            seen.add(prefix)
            line = "  " * depth + "- " + path[depth]
            cost = count_tokens(line)
            if used + cost > budget:
                lines.append("- ...")
                return "\n".join(lines)
            lines.append(line)
            used += cost
    if len(lines) == 2:
        lines.pop()
    return "\n".join(lines)


def windows(
    document: Document,
    chunks: Sequence[Chunk],
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    document_tokens: int | None = None,
) -> list[Window]:
    """One window per block that holds chunks, or the whole document when it fits."""
    tokens = count_tokens(document.text) if document_tokens is None else document_tokens
    if tokens <= max_tokens:
        return [Window(document.text, None, tuple(chunks))] if chunks else []
    outline = outline_text(document, chunks, int(max_tokens * OUTLINE_SHARE), count_tokens)
    # Room for the outline and the framing line below.
    budget = max_tokens - count_tokens(outline) - 32
    blocks = plan_blocks(document.text, chunks, max(budget, max_tokens // 2), count_tokens)
    result = []
    for block, members in blocks:
        frame = (
            f"[Excerpt {block.index + 1} of {len(blocks)}, characters {block.start}-{block.end} "
            "of a document too long to show whole]"
        )
        text = f"{outline}\n\n{frame}\n{document.text[block.start : block.end]}"
        result.append(Window(text, block, tuple(members)))
    return result


def around(
    document: Document,
    chunk: Chunk,
    chunks: Sequence[Chunk],
    max_tokens: int,
    count_tokens: Callable[[str], int],
) -> str:
    """A window of `document` for one `chunk`, at most about `max_tokens`: the outline, then
    the text centred on the chunk. For a chunk whose planned prefix the server refused as
    longer than its context window; sent once, so it need not be a shared, cacheable block."""
    outline = outline_text(document, chunks, int(max_tokens * OUTLINE_SHARE), count_tokens)
    budget = max(1, max_tokens - count_tokens(outline) - 32)
    text = document.text
    # Characters per token of this document, to place the excerpt's ends in one step.
    per_token = len(text) / max(1, count_tokens(text))
    span = max(chunk.end - chunk.start, int(budget * per_token))
    start = max(0, min(chunk.start - (span - (chunk.end - chunk.start)) // 2, len(text) - span))
    end = min(len(text), start + span)
    while end - start > chunk.end - chunk.start and count_tokens(text[start:end]) > budget:
        # A denser stretch than the average: trim both sides, never into the chunk.
        cut = max(1, (end - start) // 10)
        start, end = min(chunk.start, start + cut // 2), max(chunk.end, end - cut // 2)
        if (start, end) == (chunk.start, chunk.end):
            break
    frame = (
        f"[Excerpt: characters {start}-{end} of a document too long to show whole, around the "
        "chunk]"
    )
    return f"{outline}\n\n{frame}\n{text[start:end]}"


@dataclass(frozen=True, eq=False)
class Prefix:
    """Chunks that share one cached prefix: a document, or one window block of it. `cache` is
    False below the model's minimum cacheable size (the request then carries no marker)."""

    document: Document
    window: Window
    tokens: int  # of the rendered prefix
    cache: bool
    order: int


def plan_prefixes(
    documents: Sequence[tuple[Document, Sequence[Chunk]]],
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    render_document: Callable[[str], str],
    min_cacheable_tokens: int,
) -> list[Prefix]:
    """Every chunk's prefix, in corpus order; `render_document` gives the text the provider
    caches, whose size decides the window and the cache marker."""
    prefixes: list[Prefix] = []
    for document, chunks in documents:
        whole = count_tokens(render_document(document.text))
        found = windows(
            document,
            chunks,
            max_tokens=max_tokens,
            count_tokens=count_tokens,
            document_tokens=whole,
        )
        for window in found:
            tokens = whole if window.block is None else count_tokens(render_document(window.text))
            cache = tokens >= min_cacheable_tokens
            prefixes.append(Prefix(document, window, tokens, cache, len(prefixes)))
    return prefixes
