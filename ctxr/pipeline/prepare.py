"""Preparing documents for the writer: split each one (noting its detected language), give every
chunk its context, count each chunk's BM25 terms (the terms themselves are made batch by batch
when written, `write.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import ContextPlan, ContextsInterrupted, situate_all
from ctxr.enrich.split.inflation import LanguageBudget
from ctxr.index import components
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.documents import carries_document_vector
from ctxr.pipeline.chunk_sizes import ChunkSizes
from ctxr.pipeline.chunking import BudgetedChunker
from ctxr.pipeline.report import IndexReport
from ctxr.pipeline.write import Prepared
from ctxr.progress import Progress
from ctxr.tokens import count_tokens
from ctxr.types import Document

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
    chunker: BudgetedChunker,
    budget_for: Callable[[Document], LanguageBudget],
    plan: ContextPlan,
    settings: Settings,
    analyzer: Bm25Analyzer,
    report: IndexReport,
    progress: Progress,
) -> list[Prepared]:
    progress.start(SPLIT_PHASE, len(documents))
    pairs = []
    sizes = ChunkSizes()
    with report.timed("split"):
        for document in documents:
            budget = budget_for(document)  # detects the language once, for both uses
            chunks = chunker(document, budget)
            if budget.language is not None:
                document = replace(document, natural_language=budget.language)
            pairs.append((document, chunks))
            sizes.add(document.kind, chunks)
            progress.advance(SPLIT_PHASE)
    report.chunk_sizes = sizes.to_json()
    index_dir = Path(settings.index_dir)
    cache_dir = components.cache_dir(settings)
    with report.timed("contexts"):
        try:
            run = situate_all(
                pairs, settings.llm, settings.split.encoding, plan, index_dir, cache_dir, progress
            )
        except ContextsInterrupted as stopped:
            report.contexts = stopped.ledger  # what was paid for, for the interrupt's summary
            raise
    report.contexts = run.ledger
    prepared: list[Prepared] = []
    with report.timed("write"):  # BM25 analysis is part of writing, done here for the mean
        for document, _ in pairs:
            situated = run.situated[document.doc_id]
            counts = [len(analyzer.terms(c.indexed_text())) for c in situated]
            incomplete = document.doc_id in run.incomplete
            whole = document_terms(document, settings, analyzer) if situated else 0
            prepared.append(Prepared(document, situated, counts, incomplete, whole))
    if run.incomplete:
        why = f" (first error: {run.first_error})" if run.first_error else ""
        report.notices.append(
            f"{len(run.incomplete)} documents have chunks whose LLM context failed{why}; "
            "outline contexts used, the next run asks again for those chunks only"
        )
    return prepared
