"""The whole-document BM25 ranking in search: landed on chunks, fused third, on both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import Settings, load_settings
from ctxr.errors import ConfigError
from ctxr.index.manifest import MANIFEST_NAME
from ctxr.pipeline.build import build_index
from ctxr.retrieve.documents import land_documents
from ctxr.retrieve.service import DOCUMENT_MODE, SearchService
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.stores import LOCAL_QDRANT_WARNINGS

pytestmark = LOCAL_QDRANT_WARNINGS


def test_landing_on_the_best_chunk_or_the_carrier() -> None:
    documents = [("a0", "a", 3.0), ("b0", "b", 2.0), ("c0", "c", 1.0)]
    order = [("b2", "b"), ("a1", "a"), ("b0", "b"), ("a0", "a")]
    assert land_documents(documents, order, "best") == [("a1", 3.0), ("b2", 2.0), ("c0", 1.0)]
    assert land_documents(documents, order, "carrier") == [("a0", 3.0), ("b0", 2.0),
                                                           ("c0", 1.0)]  # fmt: skip
    assert land_documents([], order, "best") == []


# A claim whose words are spread over one abstract: "zinc" in its first chunk, "deficiency"
# and "immunity" in later ones; no single chunk holds all three.
SPREAD = "\n\n".join(
    [
        "# Zinc",
        "Zinc is a trace element found in meat and shellfish and in many cereals.",
        "Its deficiency is common where diets are poor, and children are at risk most.",
        "Low levels weaken immunity: infections last longer and heal more slowly.",
    ]
)


def _index(tmp_path: Path, url: str | None = None, **extra: Any) -> Settings:
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "zinc.md").write_text(SPREAD + "\n", "utf-8")
    (corpus / "iron.md").write_text("# Iron\n\nIron deficiency is the commonest one.\n", "utf-8")
    (corpus / "tea.md").write_text("# Tea\n\nThe kettle whistles when the water boils.\n", "utf-8")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "c",
                             chunk_tokens=24, qdrant_url=url, **extra)  # fmt: skip
    build_index([corpus], settings, embedder=HashEmbedder())
    return settings


QUERY = "zinc deficiency weakens immunity"


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_hybrid_fuses_the_document_ranking_on_the_best_chunk(
    tmp_path: Path, backend: str
) -> None:
    url = f"file:{tmp_path / 'qdrant-local'}" if backend == "server" else None
    settings = _index(tmp_path, url)
    with SearchService(settings, embedder=HashEmbedder()) as service:
        [rankings] = service.retrieve([QUERY], "hybrid", 20)
        assert set(rankings) == {"dense", "bm25", "bm25_doc"}
        assert rankings["bm25_doc"][0].payload["source"].endswith("zinc.md")
        assert all(r.payload["index"] == 0 for r in rankings["bm25_doc"])  # carriers
        hits = service.search(QUERY, k=5)
        top = hits[0]
        assert top.source.endswith("zinc.md") and top.scores["bm25_doc"].rank == 1
        documents = service.search(QUERY, k=3, mode=DOCUMENT_MODE)
        assert [set(h.scores) for h in documents] == [{"bm25_doc"}] * len(documents)
        assert documents[0].source.endswith("zinc.md")


def test_best_landing_follows_the_other_rankings_and_carrier_does_not(tmp_path: Path) -> None:
    settings = _index(tmp_path)
    with SearchService(settings, embedder=HashEmbedder()) as service:
        [rankings] = service.retrieve([QUERY], "hybrid", 20)
        best = service.search(QUERY, k=20)
    landed = [h for h in best if "bm25_doc" in h.scores]
    assert len(landed) == len(rankings["bm25_doc"])  # one landed chunk per document found
    # Each lands on its document's best chunk of the two other rankings (DBSF of both):
    # the first of that document's chunks in their own fused order.
    with SearchService(settings.replace(doc_ranking="off"),
                       embedder=HashEmbedder()) as service:  # fmt: skip
        two = service.search(QUERY, k=20)
    first_of: dict[str, str] = {}
    for h in two:
        first_of.setdefault(h.doc_id, h.chunk_id)
    for hit in landed:
        assert hit.chunk_id == first_of.get(hit.doc_id, hit.chunk_id)
    carrier = settings.replace(doc_ranking="carrier")
    with SearchService(carrier, embedder=HashEmbedder()) as service:
        hits = service.search(QUERY, k=20)
    carriers = {r.point_id for r in rankings["bm25_doc"]}
    assert {h.chunk_id for h in hits if "bm25_doc" in h.scores} == carriers


def test_off_chunk_filters_and_old_indexes_search_two_rankings(tmp_path: Path) -> None:
    settings = _index(tmp_path)
    off = settings.replace(doc_ranking="off")
    with SearchService(off, embedder=HashEmbedder()) as service:
        [rankings] = service.retrieve([QUERY], "hybrid", 20)
        assert set(rankings) == {"dense", "bm25"}
    with SearchService(settings, embedder=HashEmbedder()) as service:
        chunky = service.search(QUERY, k=5, filters={"token_count": {"gte": 1}})
        assert all("bm25_doc" not in h.scores for h in chunky)
        by_source = service.search(QUERY, k=5, filters={"kind": "markdown"})
        assert any("bm25_doc" in h.scores for h in by_source)
    # An index written before document vectors: its manifest has no `document_vectors`.
    path = Path(settings.index_dir) / MANIFEST_NAME
    body = json.loads(path.read_text("utf-8"))
    del body["document_vectors"]
    path.write_text(json.dumps(body), "utf-8")
    with SearchService(settings, embedder=HashEmbedder()) as service:
        [rankings] = service.retrieve([QUERY], "hybrid", 20)
        assert set(rankings) == {"dense", "bm25"}
        assert service.search(QUERY, k=3)[0].source.endswith("zinc.md")
        with pytest.raises(ConfigError, match="--rebuild"):
            service.search(QUERY, mode=DOCUMENT_MODE)


def test_document_weight_scales_its_share_of_the_fused_score(tmp_path: Path) -> None:
    settings = _index(tmp_path)
    assert settings.search.doc_bm25_weight == 0.5  # the default, chosen on SciFact's train queries
    full = settings.replace(doc_bm25_weight=1.0)
    half = settings.replace(doc_bm25_weight=0.5)
    with SearchService(full, embedder=HashEmbedder()) as service:
        whole = service.search(QUERY, k=1, fusion="rrf")[0]
    with SearchService(half, embedder=HashEmbedder()) as service:
        halved = service.search(QUERY, k=1, fusion="rrf")[0]
    assert whole.chunk_id == halved.chunk_id
    doc = 1 / (60 + whole.scores["bm25_doc"].rank)
    assert whole.score - halved.score == pytest.approx(doc / 2)
