"""Fixtures shared by the framework adapters' tests: the hits the Python API gives for the
test queries (computed once, before any retriever or server holds the shard), and a real
`ctxr serve` app on loopback over the same examples index, behind a bearer token. Each test
module imports them (a second module named `conftest` would clash with tests/conftest.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ctxr.config import load_settings
from tests.conftest import BuiltIndex

TOKEN = "integrations-token"
QUERY = "fix LUM-E310 migration lock held"
FILTERS = {"source": "examples/lumen/"}


@pytest.fixture(scope="module", name="expected")
def expected_hits(examples_index: BuiltIndex) -> dict[str, list[dict[str, Any]]]:
    from ctxr.retrieve.hits import hit_json
    from ctxr.retrieve.service import SearchService

    settings = load_settings(index_dir=examples_index.index_dir, cache_dir=examples_index.cache_dir)
    with SearchService(settings) as service:
        return {
            "plain": [hit_json(h) for h in service.search(QUERY, 3)],
            "filtered": [hit_json(h) for h in service.search("cache", 5, filters=FILTERS)],
        }


@pytest.fixture(scope="class", name="served_url")
def served_app_url(examples_index: BuiltIndex) -> Iterator[str]:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    import uvicorn

    from ctxr.api.app import create_app

    settings = load_settings(
        index_dir=examples_index.index_dir, cache_dir=examples_index.cache_dir, api_token=TOKEN
    )
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
