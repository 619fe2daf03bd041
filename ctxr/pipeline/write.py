"""Writing prepared chunks: embed, weight for BM25, upsert, then record in the manifest.

Batches of at most `WRITE_BATCH_CHUNKS` chunks are the unit of durability, and a large document
is cut into several: a 50k-row table used to be one batch, embedded whole before anything was
written. A document is recorded in the manifest once its last batch is upserted, and the store
is flushed before every save of the manifest, which happens when due (`manifest_pace.py`:
after each batch while that is cheap), so the saved manifest never claims more than the store
holds. A killed run therefore loses no paid work: the batches the saved manifest
does not count yet are in the embedding and response caches, so the next run writes them again
from there. A changed document leaves the manifest before its old points are deleted (one save
a window), so no manifest ever counts points that are gone.

BM25 terms are computed batch by batch, not for the whole run at once: only their counts are
kept ahead (`Prepared.term_counts`, for the mean length), which keeps memory per chunk small.

Given a `PointWriter` (Ray actors), a batch's points are built here without their dense
vectors and handed over; the actors embed them and upsert them to a Qdrant server themselves,
or embed them for the driver to write into the embedded shard. The order (old points deleted
first, the manifest recorded once every point is acknowledged) is the same, but one batch is
in flight while the next is prepared, so the actors never wait on the driver; the manifest
records batches in the order they were made, and a killed run leaves at most two batches
unrecorded. Vectors the actors upsert skip the driver's embedding cache: a killed run
re-embeds the batches its saved manifest does not count (embedding costs time, not money).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import fit_context
from ctxr.index import components
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.weights import Bm25Params, SparseTerms, document_vector
from ctxr.index.embed.base import Embedder, FloatMatrix
from ctxr.index.embed.identifiers import dense_text, splits
from ctxr.index.manifest import DocumentEntry, Manifest
from ctxr.index.payload import chunk_payload
from ctxr.index.store.base import Store, StoredPoint
from ctxr.pipeline.executors.base import PendingWrite, PointWriter
from ctxr.pipeline.manifest_pace import PacedSaves
from ctxr.pipeline.report import IndexReport
from ctxr.progress import Progress
from ctxr.types import ContextualChunk, Document

WRITE_BATCH_CHUNKS = 256  # or more, where the embedder needs more to keep its workers busy
# The embeddings bar advances after each step of this many chunks, not once per write batch:
# at ~24 chunks/s on two cores a batch of 256 took ~10 s a step.
EMBED_STEP_CHUNKS = 64
EMBED_PHASE = "embeddings"


@dataclass(slots=True)
class Prepared:
    document: Document
    chunks: list[ContextualChunk]
    term_counts: list[int]  # BM25 terms per chunk; the terms themselves are made per batch
    # Some chunks fell back to outline contexts after LLM failures: the document is written
    # but recorded with a recipe that makes the next run redo it (answered chunks are free).
    incomplete: bool = False
    # BM25 terms of the whole document when its first chunk carries a document vector, else 0
    # (`ctxr.index.bm25.documents`).
    document_terms: int = 0


@dataclass(frozen=True, slots=True)
class _Slice:
    """Chunks `start:end` of one document: a batch holds whole documents or parts of one."""

    item: Prepared
    start: int
    end: int

    @property
    def first(self) -> bool:
        return self.start == 0

    @property
    def last(self) -> bool:
        return self.end == len(self.item.chunks)


def _batches(prepared: list[Prepared], size: int) -> Iterator[list[_Slice]]:
    batch: list[_Slice] = []
    room = size
    for item in prepared:
        start = 0
        while True:
            end = min(len(item.chunks), start + room)
            batch.append(_Slice(item, start, end))
            room -= end - start
            start = end
            if room == 0:
                yield batch
                batch, room = [], size
            if start >= len(item.chunks):
                break
    if batch:
        yield batch


def write(
    prepared: list[Prepared],
    manifest: Manifest,
    store: Store,
    embedder: Embedder,
    analyzer: Bm25Analyzer,
    settings: Settings,
    recipe: str,
    report: IndexReport,
    progress: Progress,
    writer: PointWriter | None = None,
) -> None:
    """Write `prepared` in batches: embedded by `embedder` and upserted to `store` here, or
    both done by `writer` where it runs (`ctxr.pipeline.executors`)."""
    # BM25 length normalisation needs the mean chunk length of the whole index: the documents
    # kept as they are plus the ones written now. Points written earlier keep the mean of their
    # own run (IDF stays exact, Qdrant computes it at query time); --rebuild renormalises all.
    replaced = {p.document.doc_id for p in prepared}
    kept = [e for doc_id, e in manifest.documents.items() if doc_id not in replaced]
    new_counts = [n for p in prepared for n in p.term_counts]
    total_chunks = sum(e.chunks for e in kept) + len(new_counts)
    avg_len = (sum(e.terms for e in kept) + sum(new_counts)) / max(total_chunks, 1)
    whole = _document_lengths(prepared, kept, manifest, report)
    context = _Context(store, embedder, analyzer, components.bm25_params(settings), avg_len,
                       settings.embed.context_position == "before",
                       settings.embed.split_identifiers, whole,
                       PacedSaves(manifest, Path(report.index_dir), store.flush),
                       settings.embed.embedding_document_prefix,
                       _segment_points(settings))  # fmt: skip
    progress.start(EMBED_PHASE, len(new_counts))
    # The changed documents leave the manifest, saved once, before any of their old points go
    # (they may now have fewer chunks): a run killed after that leaves points the manifest does
    # not count, never the reverse, and the next run clears them. Once a window, not once a
    # batch: at 100k documents a save takes seconds.
    changed = [doc_id for doc_id in replaced if doc_id in manifest.documents]
    if changed:
        for doc_id in changed:
            report.chunks_removed += manifest.documents.pop(doc_id).chunks
        context.saves.save_now()
    try:
        batches = _batches(prepared, max(WRITE_BATCH_CHUNKS, _texts_per_call(embedder)))
        if writer is None:
            for batch in batches:
                _write_batch(batch, manifest, context, recipe, report, progress)
        else:
            _write_pipelined(writer, batches, manifest, context, recipe, report, progress)
    except BaseException:
        # What was flushed is recorded: keep it, and let the first error be the one said.
        with contextlib.suppress(Exception):
            context.saves.finish()
        raise
    context.saves.finish()


def _document_lengths(
    prepared: list[Prepared], kept: list[DocumentEntry], manifest: Manifest, report: IndexReport
) -> float:
    """The mean length of whole-document BM25 vectors (0.0: none are written this run).

    An index made before document vectors has no place for them: its documents keep two
    rankings, and the report says how to get the third."""
    new = [p.document_terms for p in prepared if p.document_terms]
    if not manifest.document_vectors:
        for item in prepared:
            item.document_terms = 0
        if new:
            report.notices.append(
                "this index was made before whole-document BM25 (a third ranking for short "
                "documents): re-index with --rebuild to get it; nothing is re-embedded"
            )
        return 0.0
    old = [e.document_terms for e in kept if e.document_terms]
    return (sum(old) + sum(new)) / len(old + new) if new else 0.0


def truncation_notice(
    report: IndexReport, max_tokens: int, own_chunker: bool, settings: Settings
) -> str:
    """Why chunks were too long for the embedder, true to how this run chunked them."""
    worst = sorted(report.truncated_sources.items(), key=lambda item: (-item[1], item[0]))[:3]
    where = ", ".join(f"{source} ({n})" for source, n in worst)
    head = (
        f"{report.chunks_truncated} of {report.chunks_written} chunks exceed the embedder's "
        f"{max_tokens}-token input (most in {where}); their tails are found by BM25 only. "
    )
    if own_chunker:
        return head + "They come from the chunker this run was given: make its chunks smaller."
    if not settings.split.cap_to_embedder:
        return head + (
            "CTXR_CAP_TO_EMBEDDER=false keeps chunks the embedder truncates: set it to true "
            "to split them"
        )
    return head + (
        "ctxr's chunker made them and split all it could: what is left over is a chunk whose "
        "repeated prefix (a continued section's heading lines) alone fills the input, or a run "
        "of a few tokens that still does not fit; `ctxr split FILE` shows them"
    )


@dataclass(frozen=True, slots=True)
class _Context:
    store: Store
    embedder: Embedder
    analyzer: Bm25Analyzer
    params: Bm25Params
    avg_len: float
    context_first: bool
    split_identifiers: bool  # code's dense text reads identifiers as words (identifiers.py)
    document_avg_len: float  # mean length of whole-document BM25 vectors; 0.0: none written
    saves: PacedSaves  # when the manifest is saved (`manifest_pace.py`)
    document_prefix: str  # read by the embedder before each chunk (CTXR_EMBEDDING_DOCUMENT_PREFIX)
    segment_points: int  # a segment is closed every this many points written (0: never)


def _count_amplification(
    batch: list[_Slice],
    owned: list[tuple[Document, ContextualChunk]],
    pieces: list[int],
    ctx: _Context,
    report: IndexReport,
) -> None:
    """Word pieces embedded (what the embedder reads of each text, before its cache) against
    the word pieces of the documents themselves, per kind: the embedding amplification."""
    limit = ctx.embedder.max_tokens
    for (document, _), n in zip(owned, pieces, strict=True):
        report.embedded_pieces[document.kind] = report.embedded_pieces.get(document.kind, 0) + min(
            n, limit
        )
    for part in batch:
        if part.first:
            document = part.item.document
            split = splits(document.kind, ctx.split_identifiers)
            n = ctx.embedder.count_tokens(dense_text(document.text, split))
            report.document_pieces[document.kind] = report.document_pieces.get(document.kind, 0) + n


def _dense_texts(
    batch: list[_Slice], ctx: _Context, report: IndexReport
) -> tuple[list[tuple[Document, ContextualChunk]], list[str], list[int]]:
    """The batch's chunks with the texts the embedder reads and their word pieces; counts
    the truncated chunks and the embedding amplification into `report`.

    Each text is counted once, as embedded: with Ray actors embedding, this counting is most
    of what the driver does per chunk. Only a chunk whose text is over the embedder's limit
    is counted again, while its context is trimmed."""
    embedder = ctx.embedder
    limit = embedder.max_tokens
    owned = [
        (part.item.document, c) for part in batch for c in part.item.chunks[part.start : part.end]
    ]
    prefix = ctx.document_prefix
    split = [splits(document.kind, ctx.split_identifiers) for document, _ in owned]

    def embedded(text: str, row: int) -> str:
        return prefix + dense_text(text, split[row])

    def counted(text: str, row: int) -> int:
        return embedder.count_tokens(embedded(text, row))

    texts = [embedded(c.indexed_text(ctx.context_first), row) for row, (_, c) in enumerate(owned)]
    pieces = [embedder.count_tokens(text) for text in texts]
    for row, (_, situated) in enumerate(owned):
        if pieces[row] <= limit or not situated.context:
            continue
        # BM25 reads the whole context; the embedder reads only max_tokens, so there a long
        # context is trimmed at a sentence boundary rather than pushing the chunk's tail out.
        fitted = fit_context(situated, functools.partial(counted, row=row), limit)
        texts[row] = embedded(fitted.indexed_text(ctx.context_first), row)
        pieces[row] = embedder.count_tokens(texts[row])
    for (document, _), n in zip(owned, pieces, strict=True):
        if n > limit:
            report.chunks_truncated += 1
            sources = report.truncated_sources
            sources[document.source] = sources.get(document.source, 0) + 1
    _count_amplification(batch, owned, pieces, ctx, report)
    return owned, texts, pieces


def _write_batch(
    batch: list[_Slice],
    manifest: Manifest,
    ctx: _Context,
    recipe: str,
    report: IndexReport,
    progress: Progress,
) -> None:
    with report.timed("embed"):
        owned, texts, pieces = _dense_texts(batch, ctx, report)
        vectors = _embed_in_steps(ctx.embedder, texts, pieces, progress)
    with report.timed("write"):
        ctx.store.delete_documents(_starting(batch))
        ctx.store.upsert(_points(owned, vectors, _carried(batch, ctx), ctx))
        _record(batch, len(owned), manifest, ctx, recipe, report)  # flushed and saved when due
    _close_full_segment(ctx, report, progress)


def _texts_per_call(embedder: Embedder) -> int:
    """Texts an embed call needs to keep a pool of workers busy: with 32 Ray actors, steps of
    64 texts (8 per ONNX batch) would leave 24 of them idle. 0 for a local embedder."""
    return int(getattr(embedder, "texts_per_call", 0))


def _longest_first(pieces: list[int], max_tokens: int) -> list[int]:
    """Row numbers, the longest text first (in the embedder's word pieces, as it reads them):
    the order the local embedder sorts one call into."""
    return sorted(range(len(pieces)), key=lambda i: -min(pieces[i], max_tokens))


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A batch handed to the writer and not yet acknowledged."""

    batch: list[_Slice]
    points: int
    pending: PendingWrite


def _write_pipelined(
    writer: PointWriter,
    batches: Iterator[list[_Slice]],
    manifest: Manifest,
    ctx: _Context,
    recipe: str,
    report: IndexReport,
    progress: Progress,
) -> None:
    """Each batch's points, all but their vectors, handed to `writer` longest first (so its
    embedder's batches, and their padding, are those of a local run). Batch n+1 is prepared
    and submitted before batch n is waited for, so the writer's workers never wait on the
    driver; batch n is recorded once acknowledged, before batch n+2 is made."""
    in_flight: _InFlight | None = None
    for batch in batches:
        with report.timed("embed"):  # what the writer's workers will read
            owned, texts, pieces = _dense_texts(batch, ctx, report)
        with report.timed("write"):
            points = _points(owned, None, _carried(batch, ctx), ctx)
            order = _longest_first(pieces, ctx.embedder.max_tokens)
            # The old points go before any new one is sent: the writer's workers upsert over
            # connections of their own, and this delete has returned by then.
            ctx.store.delete_documents(_starting(batch))
        with report.timed("embed"):  # handing it over: Ray serialises the batch here
            pending = writer.submit([texts[i] for i in order], [points[i] for i in order])
        if in_flight is not None:
            _acknowledged(in_flight, writer, manifest, ctx, recipe, report, progress)
        in_flight = _InFlight(batch, len(points), pending)
    if in_flight is not None:
        _acknowledged(in_flight, writer, manifest, ctx, recipe, report, progress)


def _acknowledged(
    flight: _InFlight,
    writer: PointWriter,
    manifest: Manifest,
    ctx: _Context,
    recipe: str,
    report: IndexReport,
    progress: Progress,
) -> None:
    """Wait for a batch the writer has, then count it in the manifest (saved when due)."""
    with report.timed("embed"):  # the workers embed (and upsert, or the driver does, here)
        flight.pending.wait(lambda done: progress.advance(EMBED_PHASE, done))
    if writer.by_workers:
        report.points_written_by_workers += flight.points
    with report.timed("write"):
        _record(flight.batch, flight.points, manifest, ctx, recipe, report)
    _close_full_segment(ctx, report, progress)


def _segment_points(settings: Settings) -> int:
    """`CTXR_SEGMENT_POINTS` for the embedded shard; 0 for a Qdrant server, which makes its
    own segments (its `optimize` does nothing, and no run should say it builds anything)."""
    return 0 if settings.store.qdrant_url else settings.store.segment_points


def _close_full_segment(ctx: _Context, report: IndexReport, progress: Progress) -> None:
    """Close the segment being written once this run has written `segment_points` points into
    it: the store builds its HNSW index, and the next points go to a new segment.

    The engine searches segments in parallel, so a large index served from one segment would
    search on one core. Counted from what this run wrote (`IndexReport.segments_closed`), so
    an index that already holds unclosed points may get one larger segment."""
    size = ctx.segment_points
    if not size or report.chunks_written < (report.segments_closed + 1) * size:
        return
    progress.note(f"closing a segment of {size:,} points: building its HNSW index...")
    build_hnsw(ctx.store, report)
    report.segments_closed += 1


def build_hnsw(store: Store, report: IndexReport) -> None:
    """Qdrant's optimize (the HNSW index of what is due), flushed, timed as the run's HNSW
    build: a segment closed during the run, and the run's last."""
    started = time.perf_counter()
    with report.timed("optimize"):
        store.optimize()
        store.flush()
    report.optimize_seconds += time.perf_counter() - started


def _embed_in_steps(
    embedder: Embedder, texts: list[str], pieces: list[int], progress: Progress
) -> FloatMatrix:
    """Vectors for `texts`, embedded `EMBED_STEP_CHUNKS` at a time so the bar moves within a
    batch (a file of thousands of chunks moves it as much as many small files do); a pool of
    workers is given at least one batch each per step (`_texts_per_call`).

    The steps take the texts longest first (in the embedder's own word pieces, as read), the
    order the local embedder sorts one call into: its batches of 8 are then the ones a single
    call would make, so the steps pad no more than one call did."""
    order = _longest_first(pieces, embedder.max_tokens)
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    step = max(EMBED_STEP_CHUNKS, _texts_per_call(embedder))
    for start in range(0, len(order), step):
        rows = order[start : start + step]
        out[rows] = embedder.embed([texts[i] for i in rows])
        progress.advance(EMBED_PHASE, len(rows))
    return out


def _carried(batch: list[_Slice], ctx: _Context) -> dict[str, SparseTerms]:
    """Whole-document BM25 vectors by carrier point id: each short document's first chunk."""
    carried: dict[str, SparseTerms] = {}
    for part in batch:
        item = part.item
        if part.first and item.document_terms and item.chunks:
            terms = ctx.analyzer.terms(item.document.text)
            vector = document_vector(terms, ctx.document_avg_len, ctx.params)
            carried[item.chunks[0].chunk.chunk_id] = vector
    return carried


def _starting(batch: list[_Slice]) -> list[str]:
    """The documents whose first chunks this batch writes: their old points go first."""
    return [s.item.document.doc_id for s in batch if s.first]


def _points(
    owned: list[tuple[Document, ContextualChunk]],
    vectors: FloatMatrix | None,
    carried: dict[str, SparseTerms],
    ctx: _Context,
) -> list[StoredPoint]:
    """The batch's points; without dense vectors (empty) when `vectors` is None."""
    points: list[StoredPoint] = []
    for row, (document, situated) in enumerate(owned):
        terms = ctx.analyzer.terms(situated.indexed_text())
        points.append(
            StoredPoint(
                point_id=situated.chunk.chunk_id,
                dense=vectors[row].tolist() if vectors is not None else [],
                sparse=document_vector(terms, ctx.avg_len, ctx.params),
                payload=chunk_payload(document, situated),
                document=carried.get(situated.chunk.chunk_id),
            )
        )
    return points


def _record(
    batch: list[_Slice],
    written: int,
    manifest: Manifest,
    ctx: _Context,
    recipe: str,
    report: IndexReport,
) -> None:
    """Count the documents this batch finished in the manifest (saved when due)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    finished = [s.item for s in batch if s.last]
    for item in finished:
        manifest.documents[item.document.doc_id] = DocumentEntry(
            source=item.document.source,
            sha256=item.document.sha256,
            recipe=recipe + "+incomplete" if item.incomplete else recipe,
            chunks=len(item.chunks),
            terms=sum(item.term_counts),
            context_kind=item.chunks[0].context_kind if item.chunks else "none",
            split_identifiers=splits(item.document.kind, ctx.split_identifiers),
            indexed_at=now,
            document_terms=item.document_terms,
            stamp=item.document.file_stamp,
        )
    ctx.saves.recorded()  # flushes first when it saves: the manifest never runs ahead
    report.documents_indexed += len(finished)
    report.chunks_written += written
