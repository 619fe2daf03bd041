"""Running an evaluation: index a data set, query it in batch, score the ranked hits.

One call builds the index(es) an ablation needs (a "none"-context and an "outline"-context
index; the embedding cache makes the second cheap for text already embedded), runs every
query once per row, maps the hits to the ids the data set judges, and scores them with
``ctxr.eval.metrics``. Indexes live under a named directory or a temporary one, never in the
user's default ``.ctxr``; the embedding cache lives apart from them (``CTXR_CACHE_DIR``, else
``$XDG_CACHE_HOME/ctxr/embeddings``) so that a temporary index re-embeds nothing next time.

How hits become judged ids is ``ctxr.eval.judging``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxr.config import Settings, load_settings
from ctxr.errors import IndexMismatchError
from ctxr.eval import metrics
from ctxr.eval.datasets import EvalDataset, load_anthropic_codebase, load_beir
from ctxr.eval.judging import judged_ranks
from ctxr.eval.rows import (
    DEFAULT_ROWS,
    ChunkSource,
    DatasetKind,
    RowSpec,
    parse_rows,
)
from ctxr.index import components
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.onnx import MODEL_NAME
from ctxr.index.filters import NOT
from ctxr.pipeline.build import index_documents
from ctxr.pipeline.chunking import Chunker
from ctxr.pipeline.report import IndexReport
from ctxr.progress import NullProgress, Progress
from ctxr.retrieve.service import SearchService
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document, DocumentKind, Hit, chunk_id_for, text_hash

NO_RERANKER = "not available: no reranker configured"
NOTE_OUTLINE = (
    "no LLM provider configured: 'outline' rows use structural outline contexts "
    "(document title, source, heading trail), not LLM-written ones"
)
NOTE_NO_TITLES = (
    "anthropic-codebase documents have no titles or paths (titles are doc_N), so their "
    "outline contexts carry almost nothing; expect outline ~ none here"
)
#: BEIR hits are chunks; fetch this many per document wanted so that dedupe leaves enough.
BEIR_HITS_PER_DOC = 3


@dataclass
class RowResult:
    name: str
    settings: dict[str, Any]
    available: bool = True
    note: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    curve: list[float] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class EvalResult:
    dataset: str
    kind: DatasetKind
    data_dir: str
    chunks: ChunkSource
    ks: list[int]
    queries: int
    documents: int
    rows: list[RowResult] = field(default_factory=list)
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def load_dataset(
    kind: DatasetKind, data_dir: Path, split: str = "test", language: str | None = None
) -> EvalDataset:
    """The data set; `split` picks a BEIR set's judged queries (`qrels/<split>.tsv`: tune
    constants on "train" or "dev", report "test"); `language` says a BEIR corpus is code."""
    if kind == "anthropic-codebase":
        return load_anthropic_codebase(data_dir)
    return load_beir(data_dir, split, language)


def to_documents(dataset: EvalDataset, kind: DatasetKind) -> list[Document]:
    """Evaluation documents as ctxr documents. Sources are short on purpose: the outline
    context names the source, and a long synthetic path would only add noise to it."""
    docs: list[Document] = []
    for d in dataset.documents:
        # A BEIR corpus is prose unless it is said to be code (CoSQA's functions).
        doc_kind: DocumentKind = "text" if kind == "beir" and d.language is None else "code"
        if kind == "beir":
            text = f"{d.title}\n\n{d.text}" if d.title else d.text
            source = f"{dataset.name}/{d.doc_id}"
        else:
            text, source = d.text, d.title
        title = d.title or source
        docs.append(Document(d.doc_id, source, text, doc_kind, title, text_hash(text), d.language))
    return docs


def given_chunker(dataset: EvalDataset, encoding: str) -> tuple[Chunker, dict[str, str]]:
    """A chunker returning each document's own chunks, and chunk id -> the set's chunk key."""
    by_doc = {d.doc_id: d.chunks for d in dataset.documents}
    keys = {
        chunk_id_for(d.doc_id, i): c.chunk_key
        for d in dataset.documents
        for i, c in enumerate(d.chunks)
    }

    def chunker(document: Document) -> list[Chunk]:
        out, doc_id = [], document.doc_id
        for i, c in enumerate(by_doc[doc_id]):
            tokens = count_tokens(c.text, encoding)
            out.append(Chunk(chunk_id_for(doc_id, i), doc_id, i, c.text, c.start, c.end, tokens))
        return out

    return chunker, keys


def eval_cache_dir(settings: Settings) -> Path:
    if settings.cache_dir is not None:
        return Path(settings.cache_dir)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ctxr" / "embeddings"


def build_for_eval(
    documents: Sequence[Document],
    settings: Settings,
    chunker: Chunker | None,
    chunker_name: str,
    progress: Progress,
) -> IndexReport:
    """Index `documents` into `settings.index_dir`; an evaluation index is disposable, so one
    made with other settings is rebuilt rather than refused."""
    kwargs: dict[str, Any] = {
        "chunker": chunker,
        "chunker_name": chunker_name,
        "progress": progress,
    }
    try:
        return index_documents(documents, settings, **kwargs)
    except IndexMismatchError:
        return index_documents(documents, settings, rebuild=True, **kwargs)


def index_info(settings: Settings, report: IndexReport) -> dict[str, Any]:
    """What a result says about one of its indexes."""
    return {
        "index_dir": str(settings.index_dir),
        "points": report.points_total,
        "chunks_written": report.chunks_written,
        "chunks_truncated_by_embedder": report.chunks_truncated,
        "seconds": round(report.seconds, 1),
    }


def search_and_score(
    service: SearchService,
    queries: Sequence[tuple[str, str]],
    mapper: Callable[[str, list[Hit]], dict[str, int]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int],
    *,
    depth: int,
    mode: str,
    candidates: int,
    fusion: str | None,
    left_out: Mapping[str, Collection[str]] | None = None,
) -> tuple[metrics.MetricReport, list[float]]:
    """Run (query id, text) pairs in one batch, map each query's hits to judged ranks with
    `mapper` and score them: the one scoring path of `ctxr eval` and `ctxr trial`.

    `left_out`: documents a query is searched without (its own, where the corpus holds the
    query: BEIR's ignore_identical_ids), by a negated filter, so the search ranks and fuses as
    if the corpus lacked them; such a query is searched alone."""
    left_out = left_out or {}
    options: dict[str, Any] = {"k": depth, "mode": mode, "candidates": candidates, "fusion": fusion}
    together = [(qid, text) for qid, text in queries if not left_out.get(qid)]
    hits = dict(zip([qid for qid, _ in together],
                    service.search_many([text for _, text in together], **options),
                    strict=True))  # fmt: skip
    for qid, text in queries:
        if left_out.get(qid):
            leaving = {"doc_id": {NOT: sorted(left_out[qid])}}
            hits[qid] = service.search(text, filters=leaving, **options)
    found = {qid: mapper(qid, hits[qid]) for qid, _ in queries}
    return metrics.report_ranks(found, qrels, ks), metrics.recall_curve(found, qrels, max(ks))


def run_eval(
    kind: DatasetKind,
    data_dir: Path,
    *,
    chunks: ChunkSource = "given",
    rows: Sequence[RowSpec] | None = None,
    ks: Sequence[int] = metrics.DEFAULT_KS,
    index_dir: Path | None = None,
    limit_queries: int | None = None,
    candidates: int | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
    split: str = "test",
    language: str | None = None,
    leave_own_out: bool = False,
) -> EvalResult:
    """Index ``data_dir``'s data set and score every ablation row; see the module docstring.

    A query that is itself a corpus document (ArguAna) has that document dropped from its
    hits, as BEIR scores it; `leave_own_out` searches it as if the corpus lacked it instead,
    which a hybrid search ranks and fuses differently (the document is each retriever's
    extreme score)."""
    progress = progress or NullProgress()
    base = settings or load_settings()
    rows = list(rows or parse_rows(DEFAULT_ROWS))
    ks = sorted(set(ks))
    if kind == "beir" and chunks == "given":
        chunks = "ours"  # BEIR judges documents and ships no chunks
    dataset = load_dataset(kind, data_dir, split, language)
    queries = list(dataset.queries[:limit_queries] if limit_queries else dataset.queries)
    qrels = {q.query_id: q.qrels for q in queries}
    documents = to_documents(dataset, kind)
    max_k = max(ks)
    depth = max_k * BEIR_HITS_PER_DOC if kind == "beir" else max_k
    # Candidates per retriever, as a user's search has them; asking for `depth` hits fetches
    # deeper, normalised over the candidates as a default search is (`ctxr.retrieve.fusion`).
    pool = candidates or base.search.candidates
    chunker: Chunker | None = None
    keys: dict[str, str] = {}
    if chunks == "given":
        chunker, keys = given_chunker(dataset, base.split.encoding)
    result = EvalResult(dataset.name, kind, str(data_dir), chunks, ks, len(queries), len(documents))
    result.notes.append(NOTE_OUTLINE)
    if kind == "anthropic-codebase":
        result.notes.append(NOTE_NO_TITLES)
    if dataset.missing_judged:
        result.notes.append(
            f"{len(dataset.missing_judged)} judged documents are not in the corpus "
            f"(e.g. {dataset.missing_judged[0]}); they count as never found, as in BEIR"
        )
    if language:
        result.notes.append(f"documents indexed as {language} source code, as files of it are")
    own = sum(1 for q in queries if q.ignore)
    if own:
        result.notes.append(
            f"{own} queries are themselves corpus documents; each is searched as if the corpus "
            "lacked its own document (--own-documents leave-out)"
            if leave_own_out
            else f"{own} queries are themselves corpus documents; a hit on a query's own "
            "document is dropped (BEIR's ignore_identical_ids)"
        )
    temporary = index_dir is None
    root = Path(tempfile.mkdtemp(prefix="ctxr-eval-")) if index_dir is None else index_dir
    cache = eval_cache_dir(base)
    mapper = judged_ranks(dataset, kind, chunks, keys)
    services: dict[str, tuple[Settings, SearchService]] = {}
    embedders: list[Embedder] = []
    try:
        for context in sorted({r.context for r in rows if r.mode != "rerank"}):
            size = f"{base.split.chunk_tokens}" if chunks == "ours" else ""
            bm25 = f"bm25-{base.store.bm25_k1:g}-{base.store.bm25_b:g}"
            name = f"{dataset.name}-{chunks}{size}-{context}-{bm25}"
            name += f"-{language}" if language else ""
            name += f"-doc{base.store.doc_bm25_tokens}" if base.store.doc_bm25_tokens else ""
            settings_c = base.replace(index_dir=root / name, context=context, cache_dir=cache)
            progress.note(f"indexing {dataset.name} ({chunks} chunks, context {context})")
            built = build_for_eval(documents, settings_c, chunker, f"eval-{chunks}", progress)
            result.indexes[context] = index_info(settings_c, built)
            embedder = components.make_embedder(settings_c, cached=True)
            embedders.append(embedder)
            services[context] = (settings_c, SearchService(settings_c, embedder=embedder))
        pairs = [(q.query_id, q.text) for q in queries]
        own_docs = {q.query_id: q.ignore for q in queries if q.ignore and leave_own_out}
        for row in rows:
            settings_r = services[row.context][0] if row.context in services else base
            record = _row_settings(row, chunks, ks, depth, pool, settings_r, kind)
            if row.mode == "rerank":
                result.rows.append(RowResult(row.name, record, available=False, note=NO_RERANKER))
                continue
            started = time.perf_counter()
            progress.note(f"querying {row.name} ({len(pairs)} queries)")
            report, curve = search_and_score(
                services[row.context][1], pairs, mapper, qrels, ks,
                depth=depth, mode=row.mode, candidates=pool, fusion=row.fusion, left_out=own_docs,
            )  # fmt: skip
            seconds = round(time.perf_counter() - started, 2)
            result.rows.append(RowResult(row.name, record, True, "", report.scores, curve, seconds))
    finally:
        for _, service in services.values():
            service.close()
        for embedder in embedders:
            getattr(embedder, "close", lambda: None)()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    return result


def _row_settings(
    row: RowSpec, chunks: str, ks: Sequence[int], depth: int, pool: int, settings: Settings,
    kind: DatasetKind,
) -> dict[str, Any]:  # fmt: skip
    """Everything needed to reproduce a row."""
    fusion = (row.fusion or settings.search.fusion) if row.mode in ("hybrid", "rerank") else None
    return {
        "mode": "hybrid+rerank" if row.mode == "rerank" else row.mode,
        "context": row.context,
        "chunks": chunks,
        "chunk_tokens": settings.split.chunk_tokens if chunks == "ours" else None,
        "ks": list(ks),
        "hits": depth,
        "candidates": pool,
        "fusion": fusion,
        "rrf_k": settings.search.rrf_k if fusion == "rrf" else None,
        "embedder": MODEL_NAME if row.mode != "bm25" else None,
        "split_identifiers": settings.embed.split_identifiers if row.mode != "bm25" else None,
        "analyzer": components.make_analyzer(settings).name if row.mode != "dense" else None,
        "bm25_k1": settings.store.bm25_k1,
        "bm25_b": settings.store.bm25_b,
        # The whole-document BM25 ranking (hybrid's third, or alone in "bm25-doc" rows).
        "doc_bm25_tokens": settings.store.doc_bm25_tokens
        if fusion or row.mode == "bm25-doc"
        else None,
        "doc_ranking": settings.search.doc_ranking if fusion else None,
        "doc_bm25_weight": settings.search.doc_bm25_weight if fusion else None,
        # DBSF's lighter BM25 for a query the dense retriever is sure of (`auto`: per embedder).
        "dense_confidence": settings.search.dense_confidence if fusion == "dbsf" else None,
        "dense_confident_bm25": settings.search.dense_confident_bm25 if fusion == "dbsf" else None,
        "doc_rank": "best chunk" if kind == "beir" else None,
    }
