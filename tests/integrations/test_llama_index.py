"""`ctxr.integrations.llama_index.CtxrRetriever` against the real llama_index.core, over the
examples index: embedded (`index_dir=`) and through a real `ctxr serve` (`base_url=`)."""

from __future__ import annotations

import asyncio
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

pytest.importorskip(
    "llama_index.core", reason="llama-index-core is not installed: pip install 'ctxr[llama-index]'"
)

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from ctxr.errors import ConfigError, IndexNotFoundError, ProviderError
from ctxr.integrations.llama_index import CtxrRetriever
from tests.fixtures.integrations import FILTERS, QUERY, TOKEN

Expected = dict[str, list[dict[str, Any]]]


def _as_hits(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [{**n.node.metadata, "text": n.node.get_content()} for n in nodes]


def _check(nodes: list[NodeWithScore], hits: list[dict[str, Any]]) -> None:
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert _as_hits(nodes) == hits  # every field of ctxr's hit, nothing lost or renamed
    assert [n.node.node_id for n in nodes] == [h["chunk_id"] for h in hits]
    assert [n.score for n in nodes] == [h["score"] for h in hits]
    for n, h in zip(nodes, hits, strict=True):
        assert isinstance(n.node, TextNode)
        assert (n.node.start_char_idx, n.node.end_char_idx) == (h["start"], h["end"])


def test_embedded_sync_and_async(examples_index: BuiltIndex, expected: Expected) -> None:
    retriever = CtxrRetriever(
        index_dir=examples_index.index_dir, k=3, cache_dir=examples_index.cache_dir
    )
    with closing(retriever):
        assert isinstance(retriever, BaseRetriever)
        nodes = retriever.retrieve(QUERY)
        _check(nodes, expected["plain"])
        _check(retriever.retrieve(QueryBundle(QUERY)), expected["plain"])
        _check(asyncio.run(retriever.aretrieve(QUERY)), expected["plain"])
        top = nodes[0].node
        assert isinstance(top, TextNode)
        text = (ROOT / top.metadata["source"]).read_bytes().decode("utf-8-sig")
        assert text[top.start_char_idx : top.end_char_idx] == top.get_content()
        # What an LLM is shown: source, section and context, not ids, offsets or scores.
        shown = top.get_content(metadata_mode=MetadataMode.LLM)
        assert "examples/docs/faq.md" in shown and top.metadata["context"] in shown
        assert top.node_id not in shown and "scores" not in shown
    filtered = CtxrRetriever(index_dir=examples_index.index_dir, k=5, filters=FILTERS)
    with closing(filtered):
        _check(filtered.retrieve("cache"), expected["filtered"])


class TestServed:
    def test_base_url_sync_and_async_match_the_embedded_hits(
        self, served_url: str, expected: Expected
    ) -> None:
        retriever = CtxrRetriever(base_url=served_url, api_token=TOKEN, k=3)
        _check(retriever.retrieve(QUERY), expected["plain"])
        _check(asyncio.run(retriever.aretrieve(QUERY)), expected["plain"])
        filtered = CtxrRetriever(base_url=served_url, api_token=TOKEN, k=5, filters=FILTERS)
        _check(filtered.retrieve("cache"), expected["filtered"])
        retriever.close()

    def test_a_wrong_token_says_what_the_server_said(self, served_url: str) -> None:
        with pytest.raises(ProviderError, match=r"401.*bearer token"):
            CtxrRetriever(base_url=served_url, api_token="wrong").retrieve(QUERY)


def test_construction_and_search_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"exactly one of index_dir= .* or base_url="):
        CtxrRetriever()
    with pytest.raises(ConfigError, match="apply to an embedded index"):
        CtxrRetriever(base_url="http://127.0.0.1:8000", fusion="rrf")
    with pytest.raises(IndexNotFoundError, match=str(tmp_path / "none")):
        CtxrRetriever(index_dir=tmp_path / "none").retrieve(QUERY)
    with pytest.raises(ConfigError, match="k must be"):
        CtxrRetriever(index_dir=tmp_path, k=0).retrieve(QUERY)
    with pytest.raises(ConfigError, match="unknown search mode 'fuzzy'"):
        CtxrRetriever(index_dir=tmp_path, mode="fuzzy").retrieve(QUERY)  # type: ignore[arg-type]
