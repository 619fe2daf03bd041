"""The chunker a run uses: ctxr's splitter with the run's settings (`CTXR_CHUNKING`, per-kind
budgets, the embedder's input as a hard cap). The indexer and the estimate both chunk with it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from ctxr.config import Settings
from ctxr.enrich.split import split_document
from ctxr.enrich.split.cap import cap_chunks, embedded_size
from ctxr.enrich.split.parent import split_parent_child
from ctxr.enrich.split.semantic import split_semantic
from ctxr.index import components
from ctxr.index.embed.base import Embedder, FloatMatrix
from ctxr.index.embed.identifiers import split_counter, splits
from ctxr.types import Chunk, Document


def default_chunker(settings: Settings, embedder: Embedder | None = None) -> Chunker:
    """ctxr's splitter with the run's settings: what `build_index` chunks files with.

    `CTXR_CHUNKING` picks structure (default), parent-child or semantic splitting; semantic
    splitting embeds sentences with `embedder` (made from the settings when none is given).
    Each document gets its kind's budget (`CTXR_CHUNK_TOKENS_BY_KIND`, else `CTXR_CHUNK_TOKENS`).
    When `embedder` counts its own tokens, its input is a hard cap: chunks it would truncate,
    with `CTXR_CONTEXT_RESERVE_TOKENS` kept for the context, are split further (`cap_chunks`).
    """
    split: Callable[..., list[Chunk]]
    if settings.chunking == "parent":
        split = functools.partial(
            split_parent_child,
            parent_tokens=settings.parent_tokens,
            overlap_tokens=settings.chunk_overlap,
            encoding=settings.encoding,
        )
    elif settings.chunking == "semantic":
        made: list[Embedder] = [embedder] if embedder is not None else []

        def embed(texts: Sequence[str]) -> FloatMatrix:
            if not made:
                made.append(components.make_embedder(settings))
            return made[0].embed(texts)

        split = functools.partial(
            split_semantic,
            embed=embed,
            percentile=settings.semantic_percentile,
            overlap_tokens=settings.chunk_overlap,
            encoding=settings.encoding,
        )
    else:
        split = functools.partial(
            split_document, overlap_tokens=settings.chunk_overlap, encoding=settings.encoding
        )
    if embedder is None or not settings.cap_to_embedder:

        def chunker(doc: Document) -> list[Chunk]:
            return split(doc, max_tokens=settings.chunk_tokens_for(doc.kind))

        return chunker
    limit = embedder.max_tokens - settings.context_reserve_tokens
    structure = settings.chunking == "structure"

    def capped(doc: Document) -> list[Chunk]:
        # Counted on the text the embedder will read (identifiers split, for code).
        count = split_counter(embedder.count_tokens, splits(doc.kind, settings.split_identifiers))
        budget = settings.chunk_tokens_for(doc.kind)
        if structure:  # the code splitter sizes its chunks to the embedder itself
            chunks = split(doc, max_tokens=budget, fits=lambda text: count(text) <= limit)
        else:
            chunks = split(doc, max_tokens=budget)
        return cap_chunks(
            doc, chunks, embedded_size(count), limit, encoding=settings.encoding
        ).chunks

    return capped


Chunker = Callable[[Document], list[Chunk]]
