"""Writing prepared chunks: embed, weight for BM25, upsert, then record in the manifest.

Batches are the unit of durability: a batch's points are flushed before the manifest says its
documents are indexed, so the manifest never claims more than the store holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import fit_context
from ctxr.index import components
from ctxr.index.bm25.weights import Bm25Params, document_vector
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.identifiers import dense_text, split_counter, splits
from ctxr.index.manifest import DocumentEntry, Manifest
from ctxr.index.payload import chunk_payload
from ctxr.index.store.base import Store, StoredPoint
from ctxr.pipeline.report import IndexReport
from ctxr.progress import Progress
from ctxr.types import ContextualChunk, Document

WRITE_BATCH_CHUNKS = 256


@dataclass(slots=True)
class Prepared:
    document: Document
    chunks: list[ContextualChunk]
    terms: list[list[str]]
    # Some chunks fell back to outline contexts after LLM failures: the document is written
    # but recorded with a recipe that makes the next run redo it (answered chunks are free).
    incomplete: bool = False


def write(
    prepared: list[Prepared],
    manifest: Manifest,
    store: Store,
    embedder: Embedder,
    settings: Settings,
    recipe: str,
    report: IndexReport,
    progress: Progress,
) -> None:
    # BM25 length normalisation needs the mean chunk length of the whole index: the documents
    # kept as they are plus the ones written now. Points written earlier keep the mean of their
    # own run (IDF stays exact, Qdrant computes it at query time); --rebuild renormalises all.
    replaced = {p.document.doc_id for p in prepared}
    kept = [e for doc_id, e in manifest.documents.items() if doc_id not in replaced]
    new_terms = [len(t) for p in prepared for t in p.terms]
    total_chunks = sum(e.chunks for e in kept) + len(new_terms)
    avg_len = (sum(e.terms for e in kept) + sum(new_terms)) / max(total_chunks, 1)
    params = components.bm25_params(settings)
    first = settings.context_position == "before"
    split = settings.split_identifiers
    progress.start("embeddings", len(new_terms))
    batch: list[Prepared] = []
    for item in prepared:
        batch.append(item)
        if sum(len(p.chunks) for p in batch) >= WRITE_BATCH_CHUNKS:
            _write_batch(
                batch, manifest, store, embedder, avg_len, params, recipe, report, first, split
            )
            progress.advance("embeddings", sum(len(p.chunks) for p in batch))
            batch = []
    if batch:
        _write_batch(
            batch, manifest, store, embedder, avg_len, params, recipe, report, first, split
        )
        progress.advance("embeddings", sum(len(p.chunks) for p in batch))
    if report.chunks_truncated:
        report.notices.append(
            f"{report.chunks_truncated} of {report.chunks_written} chunks exceed the embedder's "
            f"{embedder.max_tokens}-token input; their tails are found by BM25 only. "
            "ctxr's chunker splits chunks to fit, so these come from a chunker of your own "
            "or from runs too short to split; lower the chunk budget to avoid them."
        )


def _write_batch(
    batch: list[Prepared],
    manifest: Manifest,
    store: Store,
    embedder: Embedder,
    avg_len: float,
    params: Bm25Params,
    recipe: str,
    report: IndexReport,
    context_first: bool,
    split_identifiers: bool,
) -> None:
    # BM25 reads the whole context; the embedder reads only max_tokens, so there a long
    # context is trimmed at a sentence boundary rather than pushing the chunk's tail out.
    texts: list[str] = []
    for item in batch:
        split = splits(item.document.kind, split_identifiers)
        count = split_counter(embedder.count_tokens, split)
        for c in item.chunks:
            fitted = fit_context(c, count, embedder.max_tokens)
            texts.append(dense_text(fitted.indexed_text(context_first=context_first), split))
    vectors = embedder.embed(texts)
    report.chunks_truncated += sum(embedder.count_tokens(t) > embedder.max_tokens for t in texts)
    points: list[StoredPoint] = []
    row = 0
    for item in batch:
        for situated, terms in zip(item.chunks, item.terms, strict=True):
            points.append(
                StoredPoint(
                    point_id=situated.chunk.chunk_id,
                    dense=vectors[row].tolist(),
                    sparse=document_vector(terms, avg_len, params),
                    payload=chunk_payload(item.document, situated),
                )
            )
            row += 1
    # A changed document may now have fewer chunks: drop its old points before writing.
    store.delete_documents([p.document.doc_id for p in batch])
    store.upsert(points)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for item in batch:
        manifest.documents[item.document.doc_id] = DocumentEntry(
            source=item.document.source,
            sha256=item.document.sha256,
            recipe=recipe + "+incomplete" if item.incomplete else recipe,
            chunks=len(item.chunks),
            terms=sum(len(t) for t in item.terms),
            context_kind=item.chunks[0].context_kind if item.chunks else "none",
            split_identifiers=splits(item.document.kind, split_identifiers),
            indexed_at=now,
        )
    store.flush()
    manifest.save(Path(report.index_dir))  # after the flush: the manifest never runs ahead
    report.documents_indexed += len(batch)
    report.chunks_written += len(points)
