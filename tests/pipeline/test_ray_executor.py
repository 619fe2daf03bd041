"""A Ray-built index is the index a local run builds: the same chunk ids, payloads and BM25
vectors, dense vectors equal to float rounding, and the same hits; and a Ray run stopped
midway is completed by the next, as a local one is. With a Qdrant server as the store (a
node over HTTP, `tests.fixtures.qdrant_node`), the actors write the points themselves and the
index is still the local one.

Runs where the `ray` extra is installed (CI's Ray step), on a local Ray of 2 CPUs; skipped
elsewhere. The Ray run embeds with its own, empty cache, so every vector it writes was made on
a Ray actor, not read back from the local run's cache."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxr.config import Settings, load_settings
from ctxr.errors import IndexError_
from ctxr.index import components
from ctxr.index.bm25.weights import SparseTerms
from ctxr.index.embed.base import EmbedderWrapper, FloatMatrix
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.manifest import Manifest
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import ScannedPoint
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT
from tests.fixtures.progress import RecordingProgress
from tests.fixtures.qdrant_node import QdrantNode
from tests.fixtures.servers import serving

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

QUERIES = ("how do I restore a backup?", "rate limit retry", "configure the kettle", "tokenizer")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local Ray for the module, as `ctxr index --ray` starts for a run (2 CPUs, so two
    actors a stage, as on a developer's laptop with `CTXR_RAY_WORKERS` unset)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_index(
    local_ray: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Settings, dict[str, Any]]:
    work = tmp_path_factory.mktemp("ray-index")
    settings = load_settings(
        index_dir=work / "idx", cache_dir=work / "cache", executor="ray", ray_worker_cpus=1
    )
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)  # sources read `examples/...`, as the local fixture's do
        report = build_index(["examples"], settings)
    finally:
        os.chdir(cwd)
    return settings, report.to_json()


def _points(settings: Settings) -> dict[str, ScannedPoint]:
    dim = Manifest.load(settings.index_dir).settings.dim
    store = store_factory.open_store(settings.store, settings.index_dir, dim)
    try:
        return {p.point_id: p for page in store.scan() for p in page}
    finally:
        store.close()


def test_ray_run_reports_where_it_ran(ray_index: tuple[Settings, dict[str, Any]]) -> None:
    _, report = ray_index
    assert report["executor"] == "ray"
    assert report["failed"] == [] and report["documents_indexed"] == 10
    assert report["points_written_by_workers"] == 0  # the embedded shard: the driver writes


def _same_terms(a: SparseTerms, b: SparseTerms) -> bool:
    return list(a.indices) == list(b.indices) and np.allclose(a.values, b.values, rtol=1e-6)


def _same_points(local: dict[str, ScannedPoint], distributed: dict[str, ScannedPoint]) -> None:
    assert sorted(local) == sorted(distributed)  # uuid5 of document and index: the same chunks
    worst = 0.0
    for point_id, mine in local.items():
        theirs = distributed[point_id]
        assert theirs.payload == mine.payload
        # The embedded shard keeps BM25 weights as float32, a server as they were sent.
        assert _same_terms(theirs.sparse, mine.sparse)
        assert (theirs.document is None) == (mine.document is None)
        if theirs.document is not None and mine.document is not None:
            assert _same_terms(theirs.document, mine.document)
        gap = float(np.max(np.abs(np.asarray(theirs.dense) - np.asarray(mine.dense))))
        worst = max(worst, gap)
    assert worst < 1e-4, f"dense vectors differ by up to {worst}"


def test_ray_index_is_the_local_index(
    ray_index: tuple[Settings, dict[str, Any]], examples_index: BuiltIndex
) -> None:
    ray_settings, report = ray_index
    assert report["chunks_written"] == examples_index.report.chunks_written
    _same_points(_points(examples_index.settings), _points(ray_settings))
    local_manifest = Manifest.load(examples_index.index_dir)
    ray_manifest = Manifest.load(ray_settings.index_dir)
    assert local_manifest.documents.keys() == ray_manifest.documents.keys()
    for doc_id, entry in local_manifest.documents.items():
        assert ray_manifest.documents[doc_id].sha256 == entry.sha256
        assert ray_manifest.documents[doc_id].chunks == entry.chunks


def test_ray_index_answers_as_the_local_one(
    ray_index: tuple[Settings, dict[str, Any]], examples_index: BuiltIndex
) -> None:
    ray_settings, _ = ray_index
    with SearchService(examples_index.settings) as local, SearchService(ray_settings) as built:
        for query in QUERIES:
            mine = [h.chunk_id for h in local.search(query, k=5)]
            theirs = [h.chunk_id for h in built.search(query, k=5)]
            assert theirs == mine, query


def test_an_unchanged_corpus_costs_a_ray_run_nothing(
    ray_index: tuple[Settings, dict[str, Any]],
) -> None:
    ray_settings, _ = ray_index
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)
        again = build_index(["examples"], ray_settings)
    finally:
        os.chdir(cwd)
    assert again.documents_unchanged == 10 and again.chunks_written == 0


class _NoEmbedding(EmbedderWrapper):
    """The bundled embedder (its name, sizes and tokenizer), refusing to embed anything."""

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        raise AssertionError(f"asked to embed {len(texts)} texts the cache should hold")


def test_a_ray_run_keeps_its_vectors_in_the_embedding_cache(
    ray_index: tuple[Settings, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The actors embed while the driver prepares the next batch; the driver still caches
    # what they made, so rebuilding the index from the same cache embeds nothing.
    ray_settings, _ = ray_index
    settings = ray_settings.replace(executor="local", index_dir=tmp_path / "idx")
    cached = CachedEmbedder(_NoEmbedding(components.make_embedder(settings)),
                            components.cache_dir(settings) / "embeddings")  # fmt: skip
    monkeypatch.chdir(ROOT)
    try:
        report = build_index(["examples"], settings, embedder=cached)
    finally:
        cached.close()
    assert report.documents_indexed == 10 and cached.misses == 0 and cached.hits > 0
    _same_points(_points(ray_settings), _points(settings))


@pytest.fixture(scope="module")
def node_index(
    local_ray: None, examples_index: BuiltIndex, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Settings, dict[str, Any], QdrantNode]]:
    """A Ray run whose store is a Qdrant node over HTTP: its actors write the points."""
    work = tmp_path_factory.mktemp("ray-node")
    node = QdrantNode()
    with serving(node.app()) as url:
        settings = load_settings(
            index_dir=work / "idx",
            cache_dir=work / "cache",
            executor="ray",
            ray_worker_cpus=1,
            qdrant_url=url,
        )
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(ROOT)  # sources read `examples/...`; only for the build, not the module
            report = build_index(["examples"], settings)
        yield settings, report.to_json(), node


def test_ray_actors_write_to_a_qdrant_server_themselves(
    node_index: tuple[Settings, dict[str, Any], QdrantNode], examples_index: BuiltIndex
) -> None:
    settings, report, node = node_index
    assert report["failed"] == [] and report["documents_indexed"] == 10
    written = report["chunks_written"]
    assert written == examples_index.report.chunks_written
    assert report["points_written_by_workers"] == written == node.points_upserted
    _same_points(_points(examples_index.settings), _points(settings))
    with SearchService(examples_index.settings) as local, SearchService(settings) as built:
        for query in QUERIES:
            mine = [h.chunk_id for h in local.search(query, k=5)]
            assert [h.chunk_id for h in built.search(query, k=5)] == mine, query


def test_a_changed_document_is_rewritten_by_the_actors(
    node_index: tuple[Settings, dict[str, Any], QdrantNode],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _, node = node_index
    corpus = tmp_path / "docs"
    corpus.mkdir()
    page = corpus / "kettle.md"
    sections = [f"## Part {n}\n\nThe kettle whistles at {n}0 degrees, then rests." for n in "1234"]
    page.write_text("# Kettle\n\n" + "\n\n".join(sections) + "\n", encoding="utf-8")
    moved = settings.replace(
        index_dir=tmp_path / "idx", qdrant_collection="changed", chunk_tokens=24
    )
    monkeypatch.chdir(tmp_path)
    assert build_index(["docs"], moved).points_written_by_workers > 1
    page.write_text("# Kettle\n\nThe kettle now sings at eighty degrees.\n", encoding="utf-8")
    again = build_index(["docs"], moved)
    assert again.documents_indexed == 1 and again.points_written_by_workers == 1
    texts = [p.payload["text"] for page in _scan(moved) for p in page]
    assert len(texts) == 1 and "eighty" in texts[0]  # the old points went before the new came
    node.refuse_upserts(1, 400)  # a final refusal, said as ctxr says a store's errors
    page.write_text("# Kettle\n\nThe kettle is quiet.\n", encoding="utf-8")
    with pytest.raises(IndexError_, match=r"on the Ray worker at .*answered 400 while writing"):
        build_index(["docs"], moved)


def _scan(settings: Settings) -> list[list[ScannedPoint]]:
    store = store_factory.open_store(settings.store, settings.index_dir)
    try:
        return list(store.scan())
    finally:
        store.close()


class _CtrlC(RecordingProgress):
    """Ctrl-C at the n-th embedding step, as a user stops a long run."""

    def __init__(self, at_step: int) -> None:
        super().__init__()
        self.at_step = at_step
        self.steps = 0

    def advance(self, phase: str, amount: int = 1) -> None:
        super().advance(phase, amount)
        if phase == "embeddings":
            self.steps += 1
            if self.steps == self.at_step:
                raise KeyboardInterrupt


@pytest.mark.parametrize("store", ["shard", "node"])
def test_a_stopped_ray_run_is_completed_by_the_next(
    local_ray: None,
    examples_index: BuiltIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store: str,
) -> None:
    # "node": the actors write to a Qdrant server, and Ctrl-C comes after a batch's points
    # are written but before the manifest records them: the next run must clear and redo it.
    from ctxr.pipeline import write as writer

    monkeypatch.setattr(writer, "WRITE_BATCH_CHUNKS", 16)  # several batches to keep
    monkeypatch.chdir(ROOT)
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(serving(QdrantNode().app())) if store == "node" else None
        settings = load_settings(
            index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", executor="ray",
            qdrant_url=url,
        )  # fmt: skip
        with pytest.raises(KeyboardInterrupt):
            build_index(["examples"], settings, progress=_CtrlC(at_step=3))
        kept = Manifest.load(settings.index_dir).documents
        assert 0 < len(kept) < 10  # the batches written before Ctrl-C are recorded
        resumed = build_index(["examples"], settings)
        assert resumed.documents_unchanged == len(kept)
        assert resumed.documents_indexed == 10 - len(kept)
        assert (resumed.points_written_by_workers > 0) == (store == "node")
        _same_points(_points(examples_index.settings), _points(settings))
