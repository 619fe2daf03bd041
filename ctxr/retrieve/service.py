"""The search service: an index opened once, queried many times.

Hybrid search runs the dense and the BM25 retriever for the top `candidates` each, and fuses
the rankings in Python (not inside Qdrant) so that every hit keeps each retriever's score
and rank: by distribution-based score fusion (default), reciprocal rank fusion or weighted
rank fusion. An index with whole-document BM25 vectors adds a third ranking, short
documents by their whole text, landed on chunks (`ctxr.retrieve.documents`).
Payload filters (`ctxr.index.filters`) go into the retrievers' queries, so
they narrow the candidates rather than the results; `merge=True` joins adjacent hits of one
document into passages (`ctxr.retrieve.passages`) and `expand=True` replaces hits of a
parent-child index by their parent sections (`ctxr.retrieve.expand`). A query searched again
reads its dense vector from an in-memory cache (`ctxr.retrieve.query_cache`,
`CTXR_QUERY_CACHE_SIZE`) instead of embedding it again. The CLI, the Python API and the HTTP
API are thin layers over this class.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from ctxr.config import Settings
from ctxr.errors import ConfigError
from ctxr.index import components, integrity
from ctxr.index.bm25.weights import query_vector
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.identifiers import dense_text
from ctxr.index.filters import PayloadFilter, is_document_level, parse_filters
from ctxr.index.manifest import Manifest
from ctxr.index.payload import ChunkPayload
from ctxr.index.store.base import RANKING_FIELDS, ScoredRecord, Store
from ctxr.retrieve.around import passage_around
from ctxr.retrieve.confidence import dense_threshold
from ctxr.retrieve.expand import expand_parents
from ctxr.retrieve.fusion import DOCUMENT_RANKING, FusionParams
from ctxr.retrieve.highlight import Matches, matches
from ctxr.retrieve.passages import merge_adjacent
from ctxr.retrieve.query_cache import QueryVectorCache
from ctxr.retrieve.records import (
    chunk_record,
    fuse_rankings,
    hits_from,
    parent_spans,
    spaces_after,
)
from ctxr.retrieve.rerank import base as reranking
from ctxr.retrieve.rerank import registry as rerank_registry
from ctxr.retrieve.searcher import DOCUMENT_MODE, SearchOptions
from ctxr.retrieve.shared import close_store, open_store
from ctxr.types import Hit

__all__ = ["DOCUMENT_MODE", "SearchService"]


class SearchService:
    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.index_dir = Path(settings.index_dir)
        self.manifest = Manifest.load(self.index_dir)
        self._embedder = embedder
        self._analyzer = components.make_analyzer(settings)
        self._check_compatible()
        # Lent by the process's one open shard of this index (`ctxr.retrieve.shared`).
        self._store = open_store(settings.store, self.index_dir, self.manifest.settings.dim)
        self._closed = False
        try:  # a damaged shard is named now, not by a traceback in the first search
            integrity.check(self._store, self.manifest, self.index_dir, integrity.OPEN_SAMPLE)
        except BaseException:
            close_store(self._store)
            raise
        self._rerankers: dict[str, reranking.Reranker] = {}
        search = settings.search
        self._query_vectors = QueryVectorCache(search.query_cache_size)
        self._fusion = FusionParams(
            search.rrf_k,
            search.weighted_k,
            search.fusion_weights,
            search.doc_bm25_weight,
            confident_dense=dense_threshold(search.dense_confidence, self.manifest.settings),
            confident_bm25=search.dense_confident_bm25,
        )
        self.adopt_manifest(self.manifest)
        self._rerankers_lock = threading.Lock()

    def _check_compatible(self) -> None:
        # The embedder is loaded lazily (a BM25-only search never pays for it), but its identity
        # is known up front, so a mismatch is reported before any query runs.
        embedder = self._embedder or components.make_embedder(self.settings)
        wanted = components.index_settings(self.settings, embedder, self._analyzer)
        self.manifest.check_compatible(wanted, self.index_dir)
        self._embedder = embedder

    @property
    def store(self) -> Store:
        """The open store: a server writes its live updates through it (`ctxr.api.live`)."""
        return self._store

    @property
    def embedder(self) -> Embedder:
        assert self._embedder is not None  # set by `_check_compatible` in __init__
        return self._embedder

    def adopt_manifest(self, manifest: Manifest) -> None:
        """Serve from `manifest`, written by an update through this service's own store."""
        self.manifest = manifest
        # Queries read as the documents were embedded: split where code was embedded split.
        self._split_queries = any(e.split_identifiers for e in manifest.documents.values())
        # An index made before document vectors is searched with two rankings, as before.
        self._documents = manifest.document_vectors and self.settings.search.doc_ranking != "off"

    def __enter__(self) -> SearchService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:  # a second close must not give back another user's lease
            return
        self._closed = True
        close_store(self._store)
        for reranker in self._rerankers.values():
            reranker.close()
        close_embedder = getattr(self._embedder, "close", None)
        if callable(close_embedder):
            close_embedder()  # an HTTP embedder holds connections

    def search(self, query: str, *args: Any, **kwargs: Any) -> list[Hit]:
        """The hits for `query`: a `SearchOptions`, or its fields (`SearchOptions.given`)."""
        return self.search_many([query], *args, **kwargs)[0]

    def search_many(self, queries: Sequence[str], *args: Any, **kwargs: Any) -> list[list[Hit]]:
        """Search several queries; their embeddings are computed in one batch.

        The options (`ctxr.retrieve.searcher.SearchOptions`, or its fields): `fusion` ("dbsf",
        "rrf" or "weighted") overrides the configured method for this call; `filters` (see
        `ctxr.index.filters`) restricts both retrievers to matching chunks; `merge` joins
        adjacent hits of one document into one passage (so fewer than k may come); `rerank`
        ("llm", "http", "cross-encoder", "none"; default CTXR_RERANK) reorders the top
        `rerank_candidates` fused hits and keeps k (fused order, flagged, if it fails).
        `expand` replaces each hit that has a parent section (`CTXR_CHUNKING=parent`) by that
        section, hits of one section becoming one (before merging, when both are asked for).
        """
        options = SearchOptions.given(*args, **kwargs)
        return self._search(queries, options)

    def _search(self, queries: Sequence[str], options: SearchOptions) -> list[list[Hit]]:
        k, mode, merge, expand = options.k, options.mode, options.merge, options.expand
        reranker = self.reranker(options.rerank)
        where = parse_filters(options.filters)
        if mode == DOCUMENT_MODE and not self.manifest.document_vectors:
            raise ConfigError(
                f"the index at {self.index_dir} has no whole-document BM25 (it was made before "
                "it); re-index with --rebuild to get it"
            )
        fusion = options.fusion or self.settings.search.fusion
        window = options.candidates or self.settings.search.candidates
        depth = max(window, k)
        top = max(k, self.settings.search.rerank_candidates) if reranker else k
        # The candidates carry only what fusion, merging and expansion read; the whole
        # payloads are read for the fused top alone (`RANKING_FIELDS`).
        retrieved = self.retrieve(queries, mode, depth, where, RANKING_FIELDS)
        # More hits than candidates fetch deeper, but DBSF still normalises each ranking over
        # its first `candidates` scores: the retrievers keep the balance a default search has
        # (`ctxr.retrieve.fusion`).
        params = replace(self._fusion, window=window)
        landing = self.settings.search.doc_ranking
        fused = [fuse_rankings(r, top, fusion, params, landing) for r in retrieved]
        payloads = self._store.payloads(list(dict.fromkeys(f.key for fs in fused for f in fs)))
        results = [hits_from(f, payloads) for f in fused]
        if reranker is not None:
            results = [reranker.rerank(q, h, k).hits for q, h in zip(queries, results, strict=True)]
        spaces = [spaces_after(r) for r in retrieved]
        if expand:
            for i, rankings in enumerate(retrieved):
                expanded = expand_parents(results[i], parent_spans(rankings), self._payloads)
                results[i] = expanded.hits
                spaces[i] |= expanded.spaces
        if merge:
            results = [merge_adjacent(h, s) for h, s in zip(results, spaces, strict=True)]
        return results

    def reranker(self, name: str | None) -> reranking.Reranker | None:
        """The reranker `name` asks for (None: the configured one), made once per service."""
        chosen = rerank_registry.resolve(name, self.settings.search)
        if chosen is None:
            return None
        with self._rerankers_lock:
            if chosen not in self._rerankers:
                self._rerankers[chosen] = rerank_registry.make_reranker(chosen, self.settings)
            return self._rerankers[chosen]

    def retrieve(
        self,
        queries: Sequence[str],
        mode: str,
        depth: int,
        where: PayloadFilter | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[dict[str, list[ScoredRecord]]]:
        """Each retriever's own top-`depth` ranking per query among the chunks `where` admits,
        before fusion; each record with its whole payload, or only `fields` of it."""
        vectors = None
        if mode in ("hybrid", "dense") and queries:
            assert self._embedder is not None
            prefix = self.settings.embed.embedding_query_prefix  # the manifest's, checked
            texts = [prefix + dense_text(q, self._split_queries) for q in queries]
            vectors = self._query_vectors.embed(self._embedder, texts)  # repeats cost nothing
        results: list[dict[str, list[ScoredRecord]]] = []
        for i, query in enumerate(queries):
            rankings: dict[str, list[ScoredRecord]] = {}
            if vectors is not None:
                rankings["dense"] = self._store.query_dense(
                    vectors[i].tolist(), depth, where, fields
                )
            sparse = query_vector(self._analyzer.terms(query))
            if mode in ("hybrid", "bm25"):
                rankings["bm25"] = self._store.query_sparse(sparse, depth, where, fields)
            # A filter on chunk fields cannot be asked of a document as a whole: skip it then.
            if mode == DOCUMENT_MODE or (
                mode == "hybrid" and self._documents and is_document_level(where)
            ):
                rankings[DOCUMENT_RANKING] = self._store.query_documents(
                    sparse, depth, where, fields
                )
            for name, ranking in rankings.items():
                integrity.check_scores(name, ranking, self.index_dir)
            results.append(rankings)
        return results

    def _payloads(self, doc_id: str) -> list[ChunkPayload]:
        return [r.payload for r in self._store.document_points(doc_id)]

    def document(self, doc_id: str) -> dict[str, Any] | None:
        """One indexed document's chunks in order, each with its context; None if unknown."""
        records = self._store.document_points(doc_id)
        if not records:
            return None
        first = records[0].payload
        entry = self.manifest.documents.get(doc_id)
        return {
            "doc_id": doc_id,
            "source": str(first.get("source", doc_id)),
            "title": first.get("title"),
            "kind": first.get("kind"),
            "language": first.get("language"),
            "sha256": first.get("doc_sha256"),
            "indexed_at": entry.indexed_at if entry else None,
            "chunks": [chunk_record(r) for r in records],
        }

    def passage(self, doc_id: str, start: int, end: int, window: int = 0) -> dict[str, Any] | None:
        """The exact indexed text of `[start, end)` of a document, `window` characters either
        side (`ctxr.retrieve.around`); None when the document or the span is unknown."""
        return passage_around(self._payloads(doc_id), start, end, window)

    def highlight(self, query: str, texts: Sequence[str]) -> Matches:
        """Where each of `texts` shares a BM25 term with `query`, by this index's analyzer
        (`ctxr.retrieve.highlight`)."""
        return matches(self._analyzer, query, texts)

    def stats(self) -> dict[str, Any]:
        return {
            "index_dir": str(self.index_dir),
            "points": self._store.count(),
            "documents": len(self.manifest.documents),
            "settings": self.manifest.settings,
            "updated_at": self.manifest.updated_at,
        }
