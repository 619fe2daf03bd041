"""The chunker a run uses: ctxr's splitter with the run's settings (`CTXR_CHUNKING`, per-kind
budgets scaled by a prose document's language, the embedder's input as a hard cap). The
indexer and the estimate both chunk with it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Protocol

from ctxr.config import Settings
from ctxr.enrich.split import split_document
from ctxr.enrich.split.cap import cap_chunks, embedded_size
from ctxr.enrich.split.inflation import (
    SCALED_KINDS,
    LanguageBudget,
    detected_budget,
    fit_to_input,
    language_budget,
    plain_budget,
)
from ctxr.enrich.split.parent import split_parent_child
from ctxr.enrich.split.semantic import split_semantic
from ctxr.index import components
from ctxr.index.embed.base import Embedder, FloatMatrix
from ctxr.index.embed.identifiers import split_counter, splits
from ctxr.types import Chunk, Document


def document_budget(
    settings: Settings, doc: Document, scaled: bool | None = None
) -> LanguageBudget:
    """The chunk budget of `doc`: its kind's (`CTXR_CHUNK_TOKENS_BY_KIND`, else
    `CTXR_CHUNK_TOKENS`), scaled for a prose document by its language's token inflation
    unless `scaled` (default `CTXR_LANGUAGE_BUDGETS`) is off (`ctxr.enrich.split.inflation`).
    A prose document's language is detected either way: it goes into the payload."""
    budget = settings.split.chunk_tokens_for(doc.kind)
    if doc.kind not in SCALED_KINDS:
        return plain_budget(budget)
    if not (settings.split.language_budgets if scaled is None else scaled):
        return detected_budget(doc.text, budget)
    return language_budget(doc.text, budget, settings.split.encoding)


def chunk_budget(
    settings: Settings, doc: Document, embedder: Embedder | None = None
) -> LanguageBudget:
    """`document_budget`, stopped where the embedder's input does when it is a hard cap
    (`fit_to_input`): what the chunker sizes `doc` with, and what `ctxr split` reports."""
    budget = document_budget(settings, doc)
    if embedder is None or not settings.split.cap_to_embedder:
        return budget
    count = split_counter(embedder.count_tokens, splits(doc.kind, settings.embed.split_identifiers))
    limit = embedder.max_tokens - settings.split.context_reserve_tokens
    return fit_to_input(budget, doc.text, count, limit, settings.split.encoding)


def default_chunker(settings: Settings, embedder: Embedder | None = None) -> BudgetedChunker:
    """ctxr's splitter with the run's settings: what `build_index` chunks files with.

    `CTXR_CHUNKING` picks structure (default), parent-child or semantic splitting; semantic
    splitting embeds sentences with `embedder` (made from the settings when none is given).
    Each document gets its budget from `document_budget` (kind, then language); an explicit
    overlap and the parent budget are scaled with it, so they keep their share.
    When `embedder` counts its own tokens, its input is a hard cap: chunks it would truncate,
    with `CTXR_CONTEXT_RESERVE_TOKENS` kept for the context, are split further (`cap_chunks`).
    A caller that has the document's `chunk_budget` already (`ctxr split` reports it) passes
    it, so the language is not detected twice.
    """
    split_with: Callable[..., list[Chunk]]
    if settings.split.chunking == "parent":
        split_with = functools.partial(split_parent_child, encoding=settings.split.encoding)
    elif settings.split.chunking == "semantic":
        made: list[Embedder] = [embedder] if embedder is not None else []

        def embed(texts: Sequence[str]) -> FloatMatrix:
            if not made:
                made.append(components.make_embedder(settings))
            return made[0].embed(texts)

        split_with = functools.partial(
            split_semantic,
            embed=embed,
            percentile=settings.split.semantic_percentile,
            encoding=settings.split.encoding,
        )
    else:
        split_with = functools.partial(split_document, encoding=settings.split.encoding)

    def split(
        doc: Document, budget: LanguageBudget | None = None, **extra: Callable[[str], bool]
    ) -> list[Chunk]:
        budget = budget or document_budget(settings, doc)
        overlap = settings.split.chunk_overlap
        if overlap is not None:
            overlap = min(budget.scale(overlap), budget.max_tokens // 2)
        options: dict[str, object] = {"max_tokens": budget.max_tokens, "overlap_tokens": overlap}
        if settings.split.chunking == "parent":
            options["parent_tokens"] = max(
                budget.scale(settings.split.parent_tokens), budget.max_tokens
            )
        return split_with(doc, **options, **extra)

    if embedder is None or not settings.split.cap_to_embedder:
        return split
    limit = embedder.max_tokens - settings.split.context_reserve_tokens
    structure = settings.split.chunking == "structure"

    def capped(doc: Document, budget: LanguageBudget | None = None) -> list[Chunk]:
        # Counted on the text the embedder will read (identifiers split, for code).
        count = split_counter(
            embedder.count_tokens, splits(doc.kind, settings.embed.split_identifiers)
        )
        budget = budget or chunk_budget(settings, doc, embedder)
        if structure:  # the code splitter sizes its chunks to the embedder itself
            chunks = split(doc, budget, fits=lambda text: count(text) <= limit)
        else:
            chunks = split(doc, budget)
        return cap_chunks(
            doc, chunks, embedded_size(count), limit, encoding=settings.split.encoding
        ).chunks

    return capped


Chunker = Callable[[Document], list[Chunk]]


class BudgetedChunker(Protocol):
    """A `Chunker` that also takes the document's budget when the caller has it."""

    def __call__(self, doc: Document, budget: LanguageBudget | None = None) -> list[Chunk]: ...


def run_chunker(
    settings: Settings, chunker: Chunker | None, embedder: Embedder | None
) -> tuple[BudgetedChunker, Callable[[Document], LanguageBudget]]:
    """What a run splits with (ctxr's splitter unless `chunker` is given) and how it gets
    each document's budget, whose detected language the payload keeps. A given chunker sizes
    its chunks itself: its documents get the language only, not the scaling's token counts."""
    if chunker is None:
        return default_chunker(settings, embedder), functools.partial(
            chunk_budget, settings, embedder=embedder
        )
    given = chunker

    def split(doc: Document, budget: LanguageBudget | None = None) -> list[Chunk]:
        return given(doc)

    return split, functools.partial(document_budget, settings, scaled=False)
