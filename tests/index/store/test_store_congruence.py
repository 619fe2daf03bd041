"""One suite, two backends: `EdgeStore` (qdrant-edge) and `QdrantServerStore` (qdrant-client).

The server backend runs against qdrant-client's local mode (`:memory:`, or `path=` where a
case reopens), which speaks the server's API; no Qdrant server binary can be had on CI. The
end-to-end case also builds through a Qdrant node over HTTP (`tests.fixtures.qdrant_node`), so
qdrant-client's REST path is what writes and searches there. Each case runs on both backends,
and the cross-backend cases check that the same points give the same rankings and, for BM25
with the IDF modifier, the same scores.
"""

from __future__ import annotations

import itertools
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ctxr.config import load_settings
from ctxr.errors import ConfigError, IndexError_, IndexMismatchError, IndexNotFoundError
from ctxr.index.bm25.weights import document_vector, query_vector
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import (
    DOCUMENT_VECTOR,
    RANKING_FIELDS,
    SCROLL_PAGE,
    SPARSE_VECTOR,
    ScoredRecord,
    Store,
    StoredPoint,
)
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.server import QdrantServerStore
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from ctxr.types import chunk_id_for
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.paths import ROOT
from tests.fixtures.qdrant_node import QdrantNode
from tests.fixtures.servers import serving
from tests.fixtures.stores import (
    BACKENDS,
    LOCAL_QDRANT_WARNINGS,
    empty_store,
    partial_payload,
    quantize_now,
)

pytestmark = LOCAL_QDRANT_WARNINGS

DIM = 8
VOCAB = [
    *("lantern", "brass", "polish", "garden", "hose", "kettle"),
    *("whistle", "steam", "tea", "oil", "wick", "glass"),
]


def _points(count: int = 40, seed: int = 7) -> list[StoredPoint]:
    rng = random.Random(seed)
    points = []
    for n in range(count):
        doc_id = f"doc{n % 10}.md"
        terms = [rng.choice(VOCAB) for _ in range(rng.randint(1, 8))]
        points.append(
            StoredPoint(
                point_id=chunk_id_for(doc_id, n // 10),
                dense=[rng.uniform(-1, 1) for _ in range(DIM)],
                sparse=document_vector(terms, avg_len=4.5),
                payload=partial_payload({
                    "doc_id": doc_id,
                    "source": doc_id,
                    "index": n // 10,
                    "text": " ".join(terms),
                }),
            )
        )
    return points


POINTS = _points()
Factory = Callable[[str], Store]


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Factory]:
    """Creates an empty store of either backend; closes whatever it made."""
    made: list[Store] = []

    def make(backend: str) -> Store:
        store = empty_store(backend, tmp_path / f"edge-{len(made)}", DIM)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, make_store: Factory) -> Store:
    s = make_store(request.param)
    s.upsert(POINTS)
    s.flush()
    return s


def _ids(records: list[ScoredRecord]) -> list[str]:
    return [r.point_id for r in records]


def _assert_congruent(a: list[ScoredRecord], b: list[ScoredRecord]) -> None:
    """Same ids, same scores within 1e-4, same order except between (near-)tied scores."""
    assert {r.point_id: r.score for r in a} == pytest.approx(
        {r.point_id: r.score for r in b}, abs=1e-4
    )
    for ranking in (a, b):
        assert all(x.score >= y.score - 1e-6 for x, y in itertools.pairwise(ranking))

    def canonical(records: list[ScoredRecord]) -> list[str]:
        return _ids(sorted(records, key=lambda r: (-round(r.score, 4), r.point_id)))

    assert canonical(a) == canonical(b)


# -- each backend on its own ---------------------------------------------------------------


def test_upsert_and_count(store: Store) -> None:
    assert store.count() == len(POINTS)
    hit = store.query_dense(POINTS[3].dense, limit=1)[0]
    assert hit.point_id == POINTS[3].point_id
    assert hit.payload == POINTS[3].payload
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_a_query_can_read_only_the_fields_it_names(store: Store) -> None:
    """What a search reads of its candidates (`RANKING_FIELDS`), then the whole payloads of
    the points it keeps; an id the store does not hold is left out, not an error."""
    point = POINTS[3]
    terms = query_vector(point.payload["text"].split())
    found = [
        store.query_dense(point.dense, 5, fields=RANKING_FIELDS),
        store.query_sparse(terms, 5, fields=RANKING_FIELDS),
    ]
    for ranking in found:
        assert ranking and all(set(r.payload) <= set(RANKING_FIELDS) for r in ranking)
        assert all(r.payload["doc_id"] for r in ranking)
    assert found[0][0].point_id == point.point_id
    assert _ids(found[0]) == _ids(store.query_dense(point.dense, 5))  # same ranking either way
    wanted = [point.point_id, POINTS[11].point_id, chunk_id_for("gone.md", 0)]
    payloads = store.payloads(wanted)
    assert payloads == {point.point_id: point.payload, POINTS[11].point_id: POINTS[11].payload}
    assert store.payloads([]) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_vectors_rank_and_score_as_float32_ones(backend: str, tmp_path: Path) -> None:
    """Quantized vectors pick the candidates, their float32 originals score them: a search of
    an int8 store returns what a float32 store returns, scores included. (qdrant-client's
    local mode keeps the setting and searches float32 exactly, as it always does.)"""
    exact = empty_store(backend, tmp_path / "float32", DIM)
    quantized = empty_store(backend, tmp_path / "int8", DIM, quantization="int8")
    for store in (exact, quantized):
        store.upsert(POINTS)
        store.flush()
    if backend == "edge":  # the bytes built and searched, the choice kept with the shard
        quantized.close()
        quantize_now(tmp_path / "int8", DIM)
        quantized = EdgeStore.open(tmp_path / "int8")
        int8, float32 = (tmp_path / name / "edge_config.json" for name in ("int8", "float32"))
        assert '"int8"' in int8.read_text() and '"int8"' not in float32.read_text()
    try:
        for point in POINTS[:10]:
            _assert_congruent(
                exact.query_dense(point.dense, 10), quantized.query_dense(point.dense, 10)
            )
    finally:
        exact.close()
        quantized.close()


def test_int8_without_rescore_ranks_by_the_bytes(tmp_path: Path) -> None:
    """`CTXR_RESCORE=false` (a search setting, read at open): the candidates keep the scores
    their bytes give, not the float32 cosines a rescore reads from disk; the ranking still
    finds each point first for its own vector."""
    shard = store_factory.shard_path(tmp_path)
    quantized = empty_store("edge", shard, DIM, quantization="int8")
    quantized.upsert(POINTS)
    quantized.flush()
    quantized.close()
    quantize_now(shard, DIM)
    queries = POINTS[:10]

    def rankings(rescore: bool) -> list[list[ScoredRecord]]:
        settings = load_settings(index_dir=tmp_path, rescore=rescore)
        store = store_factory.open_store(settings.store, tmp_path)
        try:
            return [store.query_dense(p.dense, 10) for p in queries]
        finally:
            store.close()

    apart = 0.0
    for point, cosines, by_bytes in zip(queries, rankings(True), rankings(False), strict=True):
        assert by_bytes[0].point_id == point.point_id
        exact = {r.point_id: r.score for r in cosines}
        shared = [abs(r.score - exact[r.point_id]) for r in by_bytes if r.point_id in exact]
        apart = max(apart, *shared)
    assert apart > 1e-4, "every score was the float32 cosine: the originals were read"


def test_upsert_same_id_overwrites(store: Store) -> None:
    old = POINTS[0]
    payload = partial_payload({**old.payload, "v": 2})
    new = StoredPoint(old.point_id, [1.0] + [0.0] * (DIM - 1), old.sparse, payload)
    store.upsert([new])
    store.flush()
    assert store.count() == len(POINTS)
    hit = store.query_dense(new.dense, limit=1)[0]
    assert hit.point_id == old.point_id and dict(hit.payload)["v"] == 2


def test_delete_documents_removes_all_their_points(store: Store) -> None:
    store.delete_documents(["doc1.md", "doc2.md"])
    store.delete_documents([])
    store.flush()
    assert store.count() == len(POINTS) - 8
    every = store.query_dense([1.0] * DIM, limit=100)
    assert {r.payload["doc_id"] for r in every}.isdisjoint({"doc1.md", "doc2.md"})
    terms = query_vector(["lantern", "oil", "tea"])
    assert all(r.payload["doc_id"] not in ("doc1.md", "doc2.md")
               for r in store.query_sparse(terms, limit=100))  # fmt: skip


def test_empty_sparse_query_matches_nothing(store: Store) -> None:
    assert store.query_sparse(query_vector([]), limit=5) == []


def test_optimize_and_flush_are_safe_to_call(store: Store) -> None:
    store.optimize()  # edge builds HNSW (True); a server indexes by itself (False)
    store.flush()
    assert _ids(store.query_dense(POINTS[5].dense, limit=1)) == [POINTS[5].point_id]


def test_document_points_lists_one_documents_chunks_in_order(store: Store) -> None:
    records = store.document_points("doc3.md")
    assert [r.payload["index"] for r in records] == [0, 1, 2, 3]
    assert {r.payload["doc_id"] for r in records} == {"doc3.md"}
    assert [r.point_id for r in records] == [chunk_id_for("doc3.md", i) for i in range(4)]
    assert store.document_points("nope.md") == []
    store.delete_documents(["doc3.md"])
    store.flush()
    assert store.document_points("doc3.md") == []


def test_document_points_pages_past_one_scroll(make_store: Factory) -> None:
    for backend in BACKENDS:
        store = make_store(backend)
        many = [
            StoredPoint(chunk_id_for("big.md", n), [1.0] * DIM, document_vector(["tea"], 1.0),
                        partial_payload({"doc_id": "big.md", "source": "big.md", "index": n}))
            for n in range(SCROLL_PAGE + 7)
        ]  # fmt: skip
        store.upsert([*many, *POINTS])
        store.flush()
        records = store.document_points("big.md")
        assert [r.payload["index"] for r in records] == list(range(SCROLL_PAGE + 7)), backend


def test_payload_fields_page_through_every_point_with_only_the_keys_asked(
    make_store: Factory,
) -> None:
    for backend in BACKENDS:
        store = make_store(backend)
        many = [
            StoredPoint(chunk_id_for("big.md", n), [1.0] * DIM, document_vector(["tea"], 1.0),
                        partial_payload({"doc_id": "big.md", "source": "big.md", "index": n,
                                         "text": "tea"}))
            for n in range(SCROLL_PAGE + 7)
        ]  # fmt: skip
        store.upsert([*many, *POINTS])
        store.flush()
        pages = list(store.payload_fields(["doc_id", "index"]))
        assert len(pages) >= 2, backend  # more than one scroll page
        rows = [row for page in pages for row in page]
        assert len(rows) == len(many) + len(POINTS), backend
        assert all(set(row) == {"doc_id", "index"} for row in rows), backend
        assert sorted(r["index"] for r in rows if r["doc_id"] == "big.md") == list(
            range(SCROLL_PAGE + 7)
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_reopen_keeps_points(backend: str, tmp_path: Path) -> None:
    def create() -> Store:
        if backend == "edge":
            return EdgeStore.create(tmp_path / "shard", DIM)
        return QdrantServerStore.create(QdrantClient(path=str(tmp_path / "local")), "ctxr", DIM)

    def reopen() -> Store:
        if backend == "edge":
            return EdgeStore.open(tmp_path / "shard")
        client = QdrantClient(path=str(tmp_path / "local"))
        return QdrantServerStore.open(client, "ctxr", dim=DIM)

    first = create()
    first.upsert(POINTS)
    first.flush()
    expected = first.query_sparse(query_vector(["kettle", "steam"]), limit=10)
    first.close()
    again = reopen()
    try:
        assert again.count() == len(POINTS)
        _assert_congruent(again.query_sparse(query_vector(["kettle", "steam"]), limit=10), expected)
    finally:
        again.close()


# -- the two backends side by side ---------------------------------------------------------


@pytest.fixture
def both(make_store: Factory) -> tuple[Store, Store]:
    edge, server = make_store("edge"), make_store("server")
    for s in (edge, server):
        s.upsert(POINTS)
        s.flush()
    return edge, server


@pytest.mark.parametrize("seed", range(5))
def test_dense_rankings_agree(both: tuple[Store, Store], seed: int) -> None:
    rng = random.Random(seed)
    vector = [rng.uniform(-1, 1) for _ in range(DIM)]
    edge, server = (s.query_dense(vector, limit=len(POINTS)) for s in both)
    assert len(edge) == len(POINTS)
    _assert_congruent(edge, server)
    assert _ids(edge[:10]) == _ids(server[:10])


@pytest.mark.parametrize(
    "terms", [["lantern"], ["kettle", "steam"], ["oil", "wick", "glass", "tea"], VOCAB]
)
def test_bm25_rankings_and_scores_agree(both: tuple[Store, Store], terms: list[str]) -> None:
    edge, server = (s.query_sparse(query_vector(terms), limit=len(POINTS)) for s in both)
    assert edge and all(r.score > 0 for r in edge)
    _assert_congruent(edge, server)  # Qdrant's IDF modifier computed alike on both


# -- end to end: build_index + SearchService over examples/, once per backend ---------------

QUERIES = [
    "What is the default value of THUMB_CACHE_MAX?",
    "fix LUM-E310 migration lock held",
    "retry_after_ms vs Retry-After header rounding",
    "how do I back up and restore the library",
]


@pytest.fixture(scope="module")
def examples_hits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[str]]]:
    """Top-5 chunk ids per (mode, query) for the examples corpus, per backend: the edge shard,
    qdrant-client's local mode, and a Qdrant node over HTTP (`tests.fixtures.qdrant_node`)."""
    results: dict[str, dict[str, list[str]]] = {}
    base = tmp_path_factory.mktemp("congruence-e2e")
    node = QdrantNode()
    with pytest.MonkeyPatch.context() as mp, serving(node.app()) as node_url:
        mp.chdir(ROOT)  # sources read examples/... on every backend
        urls = {"edge": None, "server": f"file:{base / 'qdrant-local'}", "http": node_url}
        for backend, url in urls.items():
            settings = load_settings(
                index_dir=base / backend, cache_dir=base / "cache", qdrant_url=url
            )
            report = build_index(["examples"], settings, embedder=HashEmbedder())
            assert report.documents_indexed == 10 and report.points_total > 10
            with SearchService(settings, embedder=HashEmbedder()) as service:
                assert service.stats()["points"] == report.points_total
                results[backend] = {
                    f"{mode}:{query}": [h.chunk_id for h in service.search(query, 5, mode)]
                    for mode in ("bm25", "dense", "hybrid")
                    for query in QUERIES
                }
        assert node.points_upserted == report.points_total  # every point went over HTTP
    assert (base / "qdrant-local").is_dir()  # the server code path, through qdrant-client
    assert not (base / "server" / "qdrant").exists()  # and no edge shard beside its manifest
    assert not (base / "http" / "qdrant").exists()
    return results


@pytest.mark.parametrize("backend", ["server", "http"])
@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_examples_search_is_the_same_on_every_backend(
    examples_hits: dict[str, dict[str, list[str]]], mode: str, backend: str
) -> None:
    edge, other = examples_hits["edge"], examples_hits[backend]
    for query in QUERIES:
        key = f"{mode}:{query}"
        assert len(edge[key]) == 5
        assert edge[key] == other[key], key


# -- server-only: what a wrong collection looks like ----------------------------------------


def test_server_open_checks_the_collection() -> None:
    client = QdrantClient(":memory:")
    with pytest.raises(IndexNotFoundError, match=r"'ctxr' does not exist.*--rebuild"):
        QdrantServerStore.open(client, "ctxr", owns_client=False)
    QdrantServerStore.create(client, "ctxr", DIM, owns_client=False)
    with pytest.raises(IndexMismatchError, match=r"8-dimensional.*makes 384"):
        QdrantServerStore.open(client, "ctxr", dim=384, owns_client=False)
    client.close()


class _Answer401(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "Unauthorized"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def unauthorized_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer401)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_server_errors_name_the_url_and_the_fix_never_the_key(
    tmp_path: Path, unauthorized_url: str
) -> None:
    down = f"http://127.0.0.1:{_closed_port()}"
    for url, fix in ((down, "docker run"), (unauthorized_url, "CTXR_QDRANT_API_KEY")):
        settings = load_settings(index_dir=tmp_path, qdrant_url=url, qdrant_api_key="sekrit-key")
        with pytest.raises(IndexError_) as caught:
            store_factory.open_store(settings.store, tmp_path, DIM)
        message = str(caught.value)
        assert url in message and fix in message and "sekrit" not in message
        assert "sekrit" not in repr(settings) and "sekrit" not in str(settings)


def test_a_new_index_holds_its_vectors_as_int8_unless_told_otherwise(tmp_path: Path) -> None:
    for quantization, kept in ((None, '"int8"'), ("none", None)):
        settings = load_settings(index_dir=tmp_path / str(quantization))
        if quantization is not None:
            settings = settings.replace(quantization=quantization)
        store_factory.create_store(settings.store, settings.index_dir, DIM).close()
        config = (store_factory.shard_path(settings.index_dir) / "edge_config.json").read_text()
        assert (kept in config) if kept else ('"int8"' not in config)


def test_a_new_shard_keeps_its_closed_segments_bm25_postings_in_files(tmp_path: Path) -> None:
    """Closed segments read their postings through the page cache instead of holding them on
    the heap: the memory a long run keeps per point written (`edge._sparse_params`)."""
    settings = load_settings(index_dir=tmp_path)
    store_factory.create_store(settings.store, settings.index_dir, DIM).close()
    config = json.loads(
        (store_factory.shard_path(settings.index_dir) / "edge_config.json").read_text()
    )
    sparse = config["sparse_vectors"]
    assert set(sparse) == {SPARSE_VECTOR, DOCUMENT_VECTOR}
    assert all(params["memory"] == "cached" for params in sparse.values())


def test_settings_choose_the_backend(tmp_path: Path) -> None:
    assert load_settings(index_dir=tmp_path).store.qdrant_url is None
    with pytest.raises(ConfigError, match="http"):
        store_factory.open_store(load_settings(qdrant_url="localhost:6333").store, tmp_path)


def test_server_rebuild_drops_and_recreates_the_collection(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nBrass lanterns need polish.\n", encoding="utf-8")
    url = f"file:{tmp_path / 'qdrant-local'}"
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "c", qdrant_url=url)
    first = build_index([corpus], settings, embedder=HashEmbedder())
    assert first.points_total == 1
    (tmp_path / "idx" / "manifest.json").unlink()  # a collection this index dir knows nothing of
    with pytest.raises(IndexError_, match=r"already exists.*--rebuild"):
        build_index([corpus], settings, embedder=HashEmbedder())
    (corpus / "b.md").write_text("# B\n\nKettles whistle.\n", encoding="utf-8")
    again = build_index([corpus], settings, rebuild=True, embedder=HashEmbedder())
    assert (again.documents_indexed, again.points_total) == (2, 2)
