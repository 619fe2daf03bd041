"""`EdgeStore` on disk: upsert, query both vectors, delete by document, reopen, clear errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxr.config import Quantization
from ctxr.errors import IndexError_
from ctxr.index.bm25.weights import document_vector, query_vector
from ctxr.index.store.base import Store, StoredPoint
from ctxr.index.store.edge import EdgeStore
from ctxr.types import chunk_id_for
from tests.fixtures.stores import partial_payload

DIM = 4


def _point(doc_id: str, index: int, dense: list[float], terms: list[str]) -> StoredPoint:
    return StoredPoint(
        point_id=chunk_id_for(doc_id, index),
        dense=dense,
        sparse=document_vector(terms, avg_len=3.0),
        payload=partial_payload(
            {"doc_id": doc_id, "source": doc_id, "index": index, "text": " ".join(terms)}
        ),
    )


POINTS = [
    _point("a.md", 0, [1, 0, 0, 0], ["lantern", "brass", "polish"]),
    _point("a.md", 1, [0.1, 1, 0, 0], ["garden", "hose"]),
    _point("b.md", 0, [0.9, 0.1, 0, 0], ["lantern", "oil"]),
    _point("c.md", 0, [0, 0, 0, 1], ["kettle", "whistle", "steam", "tea"]),
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore.create(tmp_path / "shard", DIM)
    s.upsert(POINTS)
    s.flush()
    yield s
    s.close()


def test_satisfies_the_store_protocol(store: EdgeStore) -> None:
    checked: Store = store  # structural: mypy/pyright would flag a missing method
    assert checked.count() == 4


def test_dense_query_orders_by_cosine(store: EdgeStore) -> None:
    hits = store.query_dense([1, 0, 0, 0], limit=3)
    assert [h.point_id for h in hits] == [
        POINTS[0].point_id,
        POINTS[2].point_id,
        POINTS[1].point_id,
    ]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].payload["doc_id"] == "a.md" and hits[0].payload["index"] == 0


def test_sparse_query_uses_bm25_terms(store: EdgeStore) -> None:
    hits = store.query_sparse(query_vector(["kettle"]), limit=10)
    assert [h.payload["doc_id"] for h in hits] == ["c.md"]
    lantern = store.query_sparse(query_vector(["lantern"]), limit=10)
    assert {h.payload["doc_id"] for h in lantern} == {"a.md", "b.md"}
    assert all(h.score > 0 for h in lantern)
    assert store.query_sparse(query_vector([]), limit=10) == []  # no terms, no query
    assert store.query_sparse(query_vector(["absent"]), limit=10) == []


def test_upsert_same_id_overwrites(store: EdgeStore) -> None:
    store.upsert([_point("a.md", 0, [0, 0, 1, 0], ["replaced"])])
    assert store.count() == 4
    hits = store.query_sparse(query_vector(["replaced"]), limit=5)
    assert [h.point_id for h in hits] == [POINTS[0].point_id]


def test_delete_documents_removes_all_their_points(store: EdgeStore) -> None:
    store.delete_documents(["a.md", "missing.md"])
    assert store.count() == 2
    assert {h.payload["doc_id"] for h in store.query_dense([1, 0, 0, 0], 10)} == {"b.md", "c.md"}
    store.delete_documents([])  # a no-op, not an error
    assert store.count() == 2


def test_reopen_keeps_points(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeStore.create(path, DIM)
    first.upsert(POINTS)
    first.flush()
    first.close()
    again = EdgeStore.open(path)
    try:
        assert again.count() == 4
        assert again.query_dense([0, 0, 0, 1], 1)[0].payload["doc_id"] == "c.md"
        again.optimize()
        assert again.count() == 4
    finally:
        again.close()


def test_open_missing_shard_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IndexError_) as info:
        EdgeStore.open(tmp_path / "nothing-here")
    assert "nothing-here" in str(info.value)
    assert "--rebuild" in str(info.value)


def test_opening_a_shard_held_by_another_store_says_it_is_in_use(tmp_path: Path) -> None:
    held = EdgeStore.create(tmp_path / "qdrant", dim=4)
    try:
        # Held by this very process: said so, with its pid, never blamed on another.
        here = rf"already open in this process \(pid {os.getpid()}\)"
        with pytest.raises(IndexError_, match=here):
            EdgeStore.open(tmp_path / "qdrant")
    finally:
        held.close()


def test_read_ahead_reads_the_int8_bytes_the_engine_holds(tmp_path: Path) -> None:
    """Before a load, the segments' int8 vectors are read through once (the engine's own
    populate reads them a page at a time); a float32 shard has none to read."""
    import numpy as np

    from ctxr.index.store.read_ahead import read_ahead
    from tests.fixtures.stores import quantize_now

    dim = 64  # 40 points of 64 floats pass the 1 kB threshold `quantize_now` sets
    vectors = np.random.default_rng(5).normal(size=(40, dim))
    points = [_point("d.md", i, v.tolist(), ["word"]) for i, v in enumerate(vectors)]
    ways: tuple[tuple[str, Quantization], ...] = (("float32", "none"), ("int8", "int8"))
    for name, quantization in ways:
        store = EdgeStore.create(tmp_path / name, dim, quantization=quantization)
        store.upsert(points)
        store.flush()
        store.close()
    quantize_now(tmp_path / "int8", dim)
    held = sorted((tmp_path / "int8").rglob("quantized.data"))
    assert held and read_ahead(tmp_path / "int8") == sum(p.stat().st_size for p in held)
    assert read_ahead(tmp_path / "float32") == 0
    EdgeStore.open(tmp_path / "int8").close()  # and the shard loads after it
