"""The text BM25 reads for a chunk: the chunk, or the chunk widened to its neighbours.

Dense vectors need small chunks (MiniLM reads 256 word pieces), but BM25 scores a short
document best whole: on SciFact, BM25 over whole abstracts scores 0.686 nDCG@10 against
0.658 over their 200-token chunks, because a query's terms are spread across the abstract.
With a window, each chunk's BM25 terms come from the chunk and the text around it, up to
`window_tokens` (the chunk's own tokens included), while its vector still comes from the
chunk alone: the fused ranking gets the document-level term evidence and the chunk-level
meaning. The widened span is cut at whitespace and sized from the chunk's own characters per
token, so no tokenizer runs here; the context and the prefix are kept as they are.
"""

from __future__ import annotations

from ctxr.types import ContextualChunk, Document


def bm25_text(document: Document, situated: ContextualChunk, window_tokens: int) -> str:
    """What BM25 analyses for `situated`, a chunk of `document`."""
    chunk = situated.chunk
    if window_tokens <= chunk.token_count or not chunk.text:
        return situated.indexed_text()
    start, end = widened(document.text, chunk.start, chunk.end, chunk.token_count, window_tokens)
    span = document.text[start:end].strip()
    return "\n\n".join(p for p in (situated.context, chunk.prefix, span) if p)


def widened(text: str, start: int, end: int, tokens: int, window_tokens: int) -> tuple[int, int]:
    """`start:end` grown on both sides (what one side cannot take goes to the other) by about
    `window_tokens - tokens` tokens of `text`, ends moved inward to whitespace."""
    per_token = (end - start) / max(1, tokens)
    extra = int((window_tokens - tokens) * per_token)
    left = min(start, extra // 2)
    right = min(len(text) - end, extra - left)
    left = min(start, extra - right)
    new_start, new_end = start - left, end + right
    while 0 < new_start < start and not text[new_start - 1].isspace():  # not inside a word
        new_start += 1
    while end < new_end < len(text) and not text[new_end].isspace():  # nor ending inside one
        new_end -= 1
    return new_start, new_end
