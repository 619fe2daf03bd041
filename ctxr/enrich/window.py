"""Windows of long documents: the outline plus one fixed block of text per group of chunks.

A document longer than the token budget cannot be sent whole. Each chunk is sent with a window:
the document's outline (title, path, its heading trail as a list) followed by the block of the
document that holds the chunk. Blocks are FIXED consecutive spans (cut at line boundaries, each
at most the budget left after the outline), not sliding windows centred on each chunk, so every
chunk of one block sends the same bytes: one cached prefix per block. The queue treats each
block as its own document for the "first request writes the cache" rule.

Blocks depend only on the text, the budget and the token counter, so a rerun rebuilds the same
windows and hits the same provider cache and the same response cache.
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


def plan_blocks(text: str, budget: int, count_tokens: Callable[[str], int]) -> list[Block]:
    """Cut `text` into consecutive spans of at most `budget` tokens, at line ends where possible."""
    budget = max(1, budget)
    pieces: list[tuple[int, int, int]] = []  # (start, end, tokens)
    position = 0
    for line in text.splitlines(keepends=True):
        tokens = count_tokens(line)
        if tokens <= budget:
            pieces.append((position, position + len(line), tokens))
        else:
            # A single line over budget (minified code, a huge table row): cut it by characters.
            step = max(1, len(line) * budget // (tokens + 1))
            for offset in range(0, len(line), step):
                part = line[offset : offset + step]
                pieces.append((position + offset, position + offset + len(part), count_tokens(part)))
        position += len(line)
    blocks: list[Block] = []
    start, used = 0, 0
    for piece_start, piece_end, tokens in pieces:
        if used and used + tokens > budget:
            blocks.append(Block(len(blocks), start, piece_start))
            start, used = piece_start, 0
        used += tokens
        end = piece_end
    if pieces:
        blocks.append(Block(len(blocks), start, end))
    return blocks


def outline_text(document: Document, chunks: Sequence[Chunk], budget: int,
                 count_tokens: Callable[[str], int]) -> str:
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


def _block_of(chunk: Chunk, blocks: Sequence[Block]) -> Block:
    """The block that holds most of the chunk (the first one on a tie)."""
    best, overlap = blocks[0], -1
    for block in blocks:
        shared = min(chunk.end, block.end) - max(chunk.start, block.start)
        if shared > overlap:
            best, overlap = block, shared
    return best


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
    blocks = plan_blocks(document.text, max(budget, max_tokens // 2), count_tokens)
    grouped: dict[int, list[Chunk]] = {}
    for chunk in chunks:
        grouped.setdefault(_block_of(chunk, blocks).index, []).append(chunk)
    result = []
    for index in sorted(grouped):
        block = blocks[index]
        frame = (
            f"[Excerpt {index + 1} of {len(blocks)}, characters {block.start}-{block.end} "
            "of a document too long to show whole]"
        )
        text = f"{outline}\n\n{frame}\n{document.text[block.start : block.end]}"
        result.append(Window(text, block, tuple(grouped[index])))
    return result
