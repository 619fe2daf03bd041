"""Whole-document BM25 vectors: one per short document, on its carrier point, in both stores.

The stores' half (a second sparse vector only carriers hold, IDF over carriers alone, the same
scores on qdrant-edge and qdrant-client) and the indexer's half (which documents carry one,
what the manifest records, an index made before them keeps working).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.index import integrity
from ctxr.index.bm25.documents import carries_document_vector
from ctxr.index.bm25.weights import (
    Bm25Params,
    SparseTerms,
    document_vector,
    query_vector,
    tf_weight,
)
from ctxr.index.filters import is_document_level, parse_filters
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.index.store.base import Store, StoredPoint
from ctxr.index.store.edge import EdgeStore
from ctxr.pipeline.build import build_index
from ctxr.types import chunk_id_for
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.stores import BACKENDS, LOCAL_QDRANT_WARNINGS, filled_store, partial_payload

pytestmark = LOCAL_QDRANT_WARNINGS

DIM = 4
# Three documents of two chunks each; the documents' whole texts (carried by chunk 0).
DOCS = {
    "a.md": ["brass lantern", "polish wick oil"],
    "b.md": ["garden hose", "kettle steam"],
    "c.md": ["tea kettle", "whistle glass"],
}


def _points() -> list[StoredPoint]:
    points = []
    for doc_id, chunks in DOCS.items():
        whole = " ".join(chunks).split()
        for i, text in enumerate(chunks):
            points.append(
                StoredPoint(
                    chunk_id_for(doc_id, i),
                    [1.0, float(i), 0.0, 0.0],
                    document_vector(text.split(), avg_len=2.0),
                    partial_payload({"doc_id": doc_id, "source": doc_id, "index": i, "text": text}),
                    document=document_vector(whole, avg_len=4.5) if i == 0 else None,
                )
            )
    return points


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made = filled_store(request.param, tmp_path / "edge", DIM, _points())
    yield made
    made.close()


def test_only_carriers_come_back_and_idf_counts_documents(store: Store) -> None:
    # "kettle" is in two of the three documents (and in two of six chunks).
    hits = store.query_documents(query_vector(["kettle"]), limit=10)
    assert [h.payload["doc_id"] for h in hits] == ["b.md", "c.md"] or [
        h.payload["doc_id"] for h in hits
    ] == ["c.md", "b.md"]
    assert all(h.payload["index"] == 0 for h in hits)
    n_docs, n_term = 3, 2  # N counts the points holding the vector: the carriers only
    idf = math.log(1 + (n_docs - n_term + 0.5) / (n_term + 0.5))
    expected = idf * tf_weight(1, 4, 4.5, Bm25Params())
    assert [h.score for h in hits] == pytest.approx([expected, expected], rel=1e-4)
    # The chunk vector is untouched: "wick" is found in a.md's second chunk there.
    [chunk] = store.query_sparse(query_vector(["wick"]), limit=10)
    assert chunk.point_id == chunk_id_for("a.md", 1)
    # The document vector finds a.md by a word of its second chunk, on its first.
    [doc] = store.query_documents(query_vector(["wick"]), limit=10)
    assert doc.point_id == chunk_id_for("a.md", 0)
    assert store.query_documents(query_vector([]), limit=10) == []


def test_scan_reads_the_document_vector_back_on_carriers_only(store: Store) -> None:
    scanned = {p.point_id: p for page in store.scan() for p in page}
    assert len(scanned) == 6
    for doc_id in DOCS:
        assert scanned[chunk_id_for(doc_id, 0)].document is not None
        assert scanned[chunk_id_for(doc_id, 1)].document is None


def test_filters_on_document_fields_only_apply_to_documents() -> None:
    assert is_document_level(None)
    assert is_document_level(parse_filters({"source": "docs/", "kind": ["markdown"]}))
    assert is_document_level(parse_filters({"source": "*.md", "meta.tags": "api"}))
    assert not is_document_level(parse_filters({"heading_path": "Install"}))
    assert not is_document_level(parse_filters({"kind": "code", "token_count": {"gte": 50}}))


def test_which_documents_carry_a_vector() -> None:
    def count(text: str) -> int:
        return len(text.split())

    assert carries_document_vector("text", "one two three", 3, count)
    assert carries_document_vector("markdown", "one two three", 3, count)
    assert not carries_document_vector("code", "one two three", 3, count)  # prose only
    assert not carries_document_vector("text", "one two three four", 3, count)
    assert not carries_document_vector("text", "one two", 0, count)  # 0 turns them off
    assert not carries_document_vector("text", "  \n", 10, count)
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return 1

    assert not carries_document_vector("text", "x" * 1000, 10, counting)
    assert calls == []  # far too long to be worth tokenising


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "short.md").write_text("# Lanterns\n\nPolish the brass lantern.\n", "utf-8")
    long_text = "# Garden\n\n" + "\n\n".join(f"Water bed {n} with the hose." for n in range(80))
    (corpus / "long.md").write_text(long_text, "utf-8")
    return corpus


def test_index_writes_document_vectors_for_short_documents(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "c",
                             doc_bm25_tokens=200, chunk_tokens=64)  # fmt: skip
    build_index([corpus], settings, embedder=HashEmbedder())
    manifest = Manifest.load(tmp_path / "idx")
    assert manifest.document_vectors
    entries = {Path(e.source).name: e for e in manifest.documents.values()}
    assert entries["short.md"].document_terms > 0
    assert entries["long.md"].document_terms == 0 and entries["long.md"].chunks > 1
    store = EdgeStore.open(tmp_path / "idx" / "qdrant")
    try:
        carriers = [p for page in store.scan() for p in page if p.document is not None]
    finally:
        store.close()
    assert [(p.payload["source"], p.payload["index"]) for p in carriers] == [
        (entries["short.md"].source, 0)
    ]


def test_an_index_made_before_document_vectors_keeps_working(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "c",
                             doc_bm25_tokens=200, chunk_tokens=64)  # fmt: skip
    build_index([corpus], settings, embedder=HashEmbedder())
    # What an older ctxr wrote: no `document_vectors` key, no `document_terms` per document.
    path = tmp_path / "idx" / MANIFEST_NAME
    body = json.loads(path.read_text("utf-8"))
    del body["document_vectors"]
    for entry in body["documents"].values():
        del entry["document_terms"]
    path.write_text(json.dumps(body), "utf-8")
    assert not Manifest.load(tmp_path / "idx").document_vectors
    (corpus / "more.md").write_text("# Tea\n\nThe kettle whistles.\n", "utf-8")
    report = build_index([corpus], settings, embedder=HashEmbedder())
    assert any("--rebuild" in n and "whole-document BM25" in n for n in report.notices)
    entries = Manifest.load(tmp_path / "idx").documents.values()
    assert all(e.document_terms == 0 for e in entries)
    rebuilt = build_index([corpus], settings, rebuild=True, embedder=HashEmbedder())
    assert not any("whole-document" in n for n in rebuilt.notices)
    assert Manifest.load(tmp_path / "idx").document_vectors


def test_changing_the_bound_rewrites_the_documents(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "c",
                             chunk_tokens=64)  # fmt: skip
    build_index([corpus], settings, embedder=HashEmbedder())
    short = [e for e in Manifest.load(tmp_path / "idx").documents.values()
             if e.source.endswith("short.md")]  # fmt: skip
    assert short[0].document_terms > 0  # the default bound (1,024 tokens)
    off = settings.replace(doc_bm25_tokens=0)
    report = build_index([corpus], off, embedder=HashEmbedder())
    assert report.documents_indexed == 2
    assert all(e.document_terms == 0 for e in Manifest.load(tmp_path / "idx").documents.values())


def test_a_damaged_document_vector_is_found_by_the_integrity_check(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "c",
                             chunk_tokens=64)  # fmt: skip
    build_index([corpus], settings, embedder=HashEmbedder())
    manifest = Manifest.load(tmp_path / "idx")
    store = EdgeStore.open(tmp_path / "idx" / "qdrant")
    try:
        assert integrity.verify(store, manifest).sound
        carrier = next(p for page in store.scan() for p in page if p.document is not None)
        assert carrier.document is not None
        bad = SparseTerms(carrier.document.indices, [-1.0] * len(carrier.document.indices))
        store.upsert([StoredPoint(carrier.point_id, carrier.dense, carrier.sparse,
                                  carrier.payload, document=bad)])  # fmt: skip
        found = integrity.verify(store, manifest)
    finally:
        store.close()
    assert not found.sound and "BM25 weight" in found.summary()
