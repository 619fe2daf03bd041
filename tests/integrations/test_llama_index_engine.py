"""`ctxr.integrations.llama_index.CtxrRetriever` inside LlamaIndex's own `RetrieverQueryEngine`,
answering with LlamaIndex's own `MockLLM` (the framework's part: no model, no key), embedded
and through a real `ctxr serve`; retrievers that share one index and several event loops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fixtures.index import BuiltIndex

pytest.importorskip(
    "llama_index.core", reason="llama-index-core is not installed: pip install 'ctxr[llama-index]'"
)

from llama_index.core.base.response.schema import Response
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from ctxr.integrations.llama_index import CtxrRetriever
from tests.fixtures.integrations import QUERY, TOKEN

Expected = dict[str, list[dict[str, Any]]]


def _ids(nodes: Any) -> list[str]:
    return [n.node.node_id for n in nodes]


def _engine_answers(retriever: CtxrRetriever, expected: Expected) -> None:
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
    response = engine.query(QUERY)
    assert isinstance(response, Response)
    assert _ids(response.source_nodes) == [h["chunk_id"] for h in expected["plain"]]
    assert isinstance(response.response, str) and response.response  # the mock's answer
    for _ in range(2):  # each asyncio.run is a new event loop
        answer = asyncio.run(engine.aquery(QUERY))
        assert _ids(answer.source_nodes) == [h["chunk_id"] for h in expected["plain"]]


def test_a_query_engine_over_the_embedded_index(
    examples_index: BuiltIndex, expected: Expected
) -> None:
    first = CtxrRetriever(index_dir=examples_index.index_dir, k=3)
    # A second retriever on the same index in the same process shares its open shard.
    second = CtxrRetriever(index_dir=examples_index.index_dir, k=1, fusion="rrf")
    try:
        _engine_answers(first, expected)
        assert len(second.retrieve(QUERY)) == 1
        first.close()
        assert len(second.retrieve(QUERY)) == 1  # still open for the one left
    finally:
        first.close()
        second.close()


class TestServed:
    def test_a_query_engine_over_a_served_index(self, served_url: str, expected: Expected) -> None:
        _engine_answers(CtxrRetriever(base_url=served_url, api_token=TOKEN, k=3), expected)

    def test_async_retrieval_from_one_event_loop_after_another(
        self, served_url: str, expected: Expected
    ) -> None:
        retriever = CtxrRetriever(base_url=served_url, api_token=TOKEN, k=3)
        for _ in range(2):  # the second loop used to find a client bound to the closed first
            nodes = asyncio.run(retriever.aretrieve(QUERY))
            assert _ids(nodes) == [h["chunk_id"] for h in expected["plain"]]
        retriever.k = 1  # options change between calls
        assert len(asyncio.run(retriever.aretrieve(QUERY))) == 1
