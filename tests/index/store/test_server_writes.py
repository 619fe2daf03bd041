"""Writes to a Qdrant server survive a busy or restarting node and fail at once on the rest.

The server is qdrant-client's local mode (no Qdrant binary can run here) behind a node that
refuses its first requests the way a cluster does (503 while a replica moves, no connection
while a node restarts), or a Qdrant node over HTTP that answers with those statuses
(`tests.fixtures.qdrant_node`); the store under test is the real `QdrantServerStore`."""

from __future__ import annotations

import random
import threading
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ctxr.errors import IndexError_
from ctxr.index.bm25.weights import document_vector
from ctxr.index.store.base import StoredPoint
from ctxr.index.store.server import UPSERT_BATCH, QdrantServerStore
from ctxr.index.store.server_client import connect
from ctxr.index.store.server_writes import WritePolicy, transient
from ctxr.types import chunk_id_for
from tests.fixtures.qdrant_node import QdrantNode
from tests.fixtures.servers import serving
from tests.fixtures.stores import partial_payload

pytestmark = [
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant"),
    pytest.mark.filterwarnings("ignore:Local mode performs exact"),
]

DIM = 8
# No backoff in tests: what is checked is what is retried, not how long it waits.
FAST = WritePolicy(parallel=3, attempts=4, max_wait=0.0)


class RefusingNode:
    """A client whose first `refusals` upserts fail with `error()`; the rest reach the server,
    one at a time (a server applies concurrent upserts; local mode, a Python object, cannot)."""

    def __init__(self, client: QdrantClient, refusals: int, error: Any) -> None:
        self._client = client
        self._left = refusals
        self._error = error
        self._lock = threading.Lock()
        self.upserts = 0

    def upsert(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.upserts += 1
            refuse = self._left > 0
            self._left -= 1
            if not refuse:
                return self._client.upsert(*args, **kwargs)
        raise self._error()

    @property
    def init_options(self) -> dict[str, Any]:
        return {"url": "http://qdrant-node:6333"}  # a server's: writes go out in parallel

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _status(code: int) -> UnexpectedResponse:
    return UnexpectedResponse(code, "refused", b'{"status": "busy"}', httpx.Headers())


def _no_connection() -> ResponseHandlingException:
    return ResponseHandlingException(ConnectionRefusedError("connection refused"))


def _points(count: int) -> list[StoredPoint]:
    rng = random.Random(3)
    return [
        StoredPoint(
            point_id=chunk_id_for(f"doc{n // 100}.md", n % 100),
            dense=[rng.uniform(-1, 1) for _ in range(DIM)],
            sparse=document_vector(["lantern", "brass"][: 1 + n % 2], avg_len=1.5),
            payload=partial_payload(
                {
                    "doc_id": f"doc{n // 100}.md",
                    "source": f"doc{n // 100}.md",
                    "index": n % 100,
                    "text": "lantern",
                }
            ),
        )
        for n in range(count)
    ]


def _store(node: RefusingNode) -> QdrantServerStore:
    real = node._client
    QdrantServerStore.create(real, "ctxr", DIM, owns_client=False).close()
    return QdrantServerStore.open(node, "ctxr", DIM, writes=FAST)  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [lambda: _status(503), lambda: _status(429), _no_connection])
def test_a_busy_or_restarting_node_is_written_to_once_it_answers(error: Any) -> None:
    # Fewer refusals than a batch's attempts: whichever batches the refusals fall on (threads
    # decide), each is written within its attempts.
    refusals = FAST.attempts - 1
    node = RefusingNode(QdrantClient(":memory:"), refusals=refusals, error=error)
    store = _store(node)
    points = _points(3 * UPSERT_BATCH + 10)  # four batches, sent three at a time
    store.upsert(points)
    assert store.count() == len(points)
    assert node.upserts == 4 + refusals  # each batch once, and each refused try again
    store.close()


def test_a_final_answer_is_not_retried() -> None:
    node = RefusingNode(QdrantClient(":memory:"), refusals=1, error=lambda: _status(400))
    store = _store(node)
    with pytest.raises(IndexError_, match="answered 400 while writing to 'ctxr'"):
        store.upsert(_points(10))
    assert node.upserts == 1
    store.close()


def test_a_node_that_never_comes_back_is_named_after_the_last_try() -> None:
    node = RefusingNode(QdrantClient(":memory:"), refusals=100, error=_no_connection)
    store = _store(node)
    with pytest.raises(IndexError_, match="cannot reach the Qdrant server"):
        store.upsert(_points(10))
    assert node.upserts == FAST.attempts
    store.close()


def test_what_counts_as_transient() -> None:
    assert transient(_no_connection()) and transient(_status(503)) and transient(_status(504))
    assert not transient(_status(400)) and not transient(_status(401))
    assert not transient(ValueError("a malformed point"))


@pytest.mark.parametrize("status", [503, 429])
def test_a_node_over_http_that_answers_busy_is_written_to_once_it_answers(status: int) -> None:
    # The same, through qdrant-client's REST path: the node answers real HTTP statuses.
    node = QdrantNode()
    with serving(node.app()) as url:
        client = connect(url)
        QdrantServerStore.create(client, "ctxr", DIM, owns_client=False).close()
        store = QdrantServerStore.open(client, "ctxr", DIM, where=url, writes=FAST)
        node.refuse_upserts(FAST.attempts - 1, status)
        points = _points(3 * UPSERT_BATCH + 10)
        store.upsert(points)
        assert store.count() == len(points) == node.points_upserted
        assert node.refused == FAST.attempts - 1 and node.upserts == 4
        node.refuse_upserts(1, 400)  # a final answer, said with the node's own message
        with pytest.raises(IndexError_, match=f"at {url} answered 400 while writing to 'ctxr'"):
            store.upsert(points[:10])
        store.close()
