"""Preparing documents for the writer: split each one (noting its detected language), give every
chunk its context, count each chunk's BM25 terms (the terms themselves are made batch by batch
when written, `write.py`)."""

from __future__ import annotations

from collections.abc import Iterable

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import ContextRun, ContextsInterrupted, Situator
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.documents import carries_document_vector
from ctxr.pipeline.chunk_sizes import ChunkSizes
from ctxr.pipeline.report import IndexReport
from ctxr.pipeline.write import Prepared
from ctxr.progress import Progress
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document

SPLIT_PHASE = "split"  # the progress phase: one step a document


def document_terms(document: Document, settings: Settings, analyzer: Bm25Analyzer) -> int:
    """BM25 terms of the whole document if it gets a document vector, else 0."""

    def count(text: str) -> int:
        return count_tokens(text, settings.split.encoding)

    if not carries_document_vector(
        document.kind, document.text, settings.store.doc_bm25_tokens, count
    ):
        return 0
    return len(analyzer.terms(document.text))


def prepare(
    documents: list[Document],
    splits: Iterable[tuple[Document, list[Chunk]]],
    situator: Situator,
    settings: Settings,
    analyzer: Bm25Analyzer,
    report: IndexReport,
    progress: Progress,
    sizes: ChunkSizes,
) -> tuple[list[Prepared], ContextRun]:
    """One window's documents, split, situated and counted; `sizes` gathers the run's chunk
    sizes across windows."""
    progress.start(SPLIT_PHASE, len(documents))
    pairs = []
    with report.timed("split"):
        for document, chunks in splits:  # the executor's, in `documents`' order
            pairs.append((document, chunks))
            sizes.add(document.kind, chunks)
            progress.advance(SPLIT_PHASE)
    report.chunk_sizes = sizes.to_json()
    with report.timed("contexts"):
        try:
            run = situator.situate(pairs)
        except ContextsInterrupted as stopped:
            report.contexts = stopped.ledger  # what was paid for, for the interrupt's summary
            raise
    report.contexts = run.ledger  # the run's ledger: every window so far
    prepared: list[Prepared] = []
    with report.timed("write"):  # BM25 analysis is part of writing, done here for the mean
        for document, _ in pairs:
            situated = run.situated[document.doc_id]
            counts = [len(analyzer.terms(c.indexed_text())) for c in situated]
            incomplete = document.doc_id in run.incomplete
            whole = document_terms(document, settings, analyzer) if situated else 0
            prepared.append(Prepared(document, situated, counts, incomplete, whole))
    return prepared, run


def incomplete_notice(documents: int, first_error: str | None) -> str:
    """What the report says of documents whose chunks fell back to outline contexts."""
    why = f" (first error: {first_error})" if first_error else ""
    return (
        f"{documents} documents have chunks whose LLM context failed{why}; "
        "outline contexts used, the next run asks again for those chunks only"
    )
