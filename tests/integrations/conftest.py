"""Fixtures shared by the framework adapters' tests: the hits the Python API gives for the
test queries (computed once, before any retriever or server holds the shard), and a real
`ctxr serve` app on loopback over the same examples index, behind a bearer token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.index import BuiltIndex
from tests.fixtures.integrations import FILTERS, QUERY, TOKEN
from tests.fixtures.servers import serving


@pytest.fixture(scope="module", name="expected")
def expected_hits(examples_index: BuiltIndex) -> dict[str, list[dict[str, Any]]]:
    from ctxr.retrieve.hits import hit_json
    from ctxr.retrieve.service import SearchService

    settings = examples_index.settings_with()
    with SearchService(settings) as service:
        return {
            "plain": [hit_json(h) for h in service.search(QUERY, 3)],
            "filtered": [hit_json(h) for h in service.search("cache", 5, filters=FILTERS)],
        }


@pytest.fixture(scope="class", name="served_url")
def served_app_url(examples_index: BuiltIndex) -> Iterator[str]:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from ctxr.api.app import create_app

    with serving(create_app(examples_index.settings_with(api_token=TOKEN))) as url:
        yield url
