"""Semantic chunking: cut prose where the topic changes, as the configured embedder sees it.

The text is cut into sentences (paragraphs first, then ``recursive.sentences``, so that a
paragraph without final punctuation still ends a sentence). Every sentence is embedded with
the embedder the index uses, and the cosine distance between each pair of neighbouring
sentences is taken; a breakpoint falls after every sentence whose distance to the next exceeds
the ``percentile``-th percentile of those distances (95th by default). The sentences between
two breakpoints are a segment. A segment that fits ``max_tokens`` is one chunk; a larger one is
split by the structure splitter (``split_document`` on the segment, offsets mapped back), so
no chunk exceeds the budget and every invariant of ``split_document`` holds. Segments are not
merged across a breakpoint: small topical chunks are the point of the option.

Only plain prose (``kind == "text"``) is cut this way; other kinds (Markdown, code, ...) have
structure of their own, which sentences would cut through (a fence, a table), and go to the
structure splitter unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from ctxr.enrich.split import split_document
from ctxr.enrich.split.recursive import paragraphs, sentences
from ctxr.enrich.split.sizing import Sizer, Span, trim
from ctxr.errors import ConfigError
from ctxr.tokens import DEFAULT_ENCODING
from ctxr.types import Chunk, Document, chunk_id_for

__all__ = ["EmbedFn", "breakpoints", "split_semantic"]

# Texts in, one float row per text out (an `Embedder.embed`).
EmbedFn = Callable[[Sequence[str]], npt.NDArray[np.float32]]

_EMBED_BATCH = 256


def split_semantic(
    doc: Document,
    embed: EmbedFn,
    *,
    max_tokens: int = 256,
    percentile: float = 95.0,
    overlap_tokens: int | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> list[Chunk]:
    """Chunks of at most ``max_tokens`` tokens whose boundaries follow topic shifts."""
    if not 0.0 <= percentile <= 100.0:
        raise ConfigError(f"semantic percentile must be between 0 and 100, got {percentile}")
    if doc.kind != "text":
        return split_document(
            doc, max_tokens=max_tokens, overlap_tokens=overlap_tokens, encoding=encoding
        )
    units = [s for p in paragraphs(doc.text, 0, len(doc.text)) for s in sentences(doc.text, *p)]
    if not units:
        return []
    vectors = _embed_all(embed, [doc.text[s:e] for s, e in units])
    cuts = breakpoints(vectors, percentile)
    sizer = Sizer(doc.text, encoding)
    out: list[Chunk] = []
    begin = 0
    for cut in [*cuts, len(units)]:
        segment = trim(doc.text, units[begin][0], units[cut - 1][1])
        begin = cut
        if segment is None:
            continue
        out.extend(_segment_chunks(doc, sizer, segment, max_tokens, overlap_tokens, encoding))
    return [
        replace(chunk, index=index, chunk_id=chunk_id_for(doc.doc_id, index))
        for index, chunk in enumerate(out)
    ]


def breakpoints(vectors: npt.NDArray[np.float32], percentile: float) -> list[int]:
    """Indexes i (1..n-1) such that a segment starts at unit i: the distance between units
    i-1 and i exceeds the ``percentile``-th percentile of all neighbouring distances."""
    if len(vectors) < 2:
        return []
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1)
    norms[norms == 0.0] = 1.0
    v = v / norms[:, None]
    distances = 1.0 - np.einsum("ij,ij->i", v[:-1], v[1:])
    threshold = float(np.percentile(distances, percentile))
    return [i + 1 for i, d in enumerate(distances) if d > threshold]


def _embed_all(embed: EmbedFn, texts: list[str]) -> npt.NDArray[np.float32]:
    rows = [
        np.asarray(embed(texts[i : i + _EMBED_BATCH]), dtype=np.float32)
        for i in range(0, len(texts), _EMBED_BATCH)
    ]
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def _segment_chunks(
    doc: Document,
    sizer: Sizer,
    segment: Span,
    max_tokens: int,
    overlap_tokens: int | None,
    encoding: str,
) -> list[Chunk]:
    start, end = segment
    sized = sizer.sized(start, end)
    if sized.tokens <= max_tokens:
        return [
            Chunk(
                chunk_id="",
                doc_id=doc.doc_id,
                index=0,
                text=doc.text[start:end],
                start=start,
                end=end,
                token_count=sized.tokens,
            )
        ]
    part = replace(doc, text=doc.text[start:end])
    chunks = split_document(
        part, max_tokens=max_tokens, overlap_tokens=overlap_tokens, encoding=encoding
    )
    return [replace(c, start=c.start + start, end=c.end + start) for c in chunks]
