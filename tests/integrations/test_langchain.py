"""`ctxr.integrations.langchain.CtxrRetriever` against the real langchain_core, over the
examples index: embedded (`index_dir=`) and through a real `ctxr serve` (`base_url=`)."""

from __future__ import annotations

import asyncio
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.index import BuiltIndex

pytest.importorskip(
    "langchain_core", reason="langchain-core is not installed: pip install 'ctxr[langchain]'"
)

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ValidationError

from ctxr.errors import ConfigError, IndexNotFoundError, ProviderError
from ctxr.integrations.langchain import CtxrRetriever
from tests.fixtures.integrations import FILTERS, QUERY, TOKEN

Expected = dict[str, list[dict[str, Any]]]
FUZZY: Any = "fuzzy"  # no search mode: typed Any, since refusing it is the point


def _as_hits(docs: list[Document]) -> list[dict[str, Any]]:
    return [{**d.metadata, "text": d.page_content} for d in docs]


def _check(docs: list[Document], hits: list[dict[str, Any]]) -> None:
    assert all(isinstance(d, Document) for d in docs)
    assert _as_hits(docs) == hits  # every field of ctxr's hit, nothing lost or renamed
    assert [d.id for d in docs] == [h["chunk_id"] for h in hits]


def test_embedded_sync_and_async(examples_index: BuiltIndex, expected: Expected) -> None:
    retriever = CtxrRetriever(
        index_dir=examples_index.index_dir, k=3, settings={"cache_dir": examples_index.cache_dir}
    )
    with closing(retriever):
        assert isinstance(retriever, BaseRetriever)
        docs = retriever.invoke(QUERY)
        _check(docs, expected["plain"])
        assert docs[0].metadata["source"] == "examples/docs/faq.md"
        assert "LUM-E310" in docs[0].page_content and docs[0].metadata["heading_path"]
        _check(asyncio.run(retriever.ainvoke(QUERY)), expected["plain"])
        batch = retriever.batch([QUERY, QUERY])
        assert [_as_hits(b) for b in batch] == [expected["plain"]] * 2
    filtered = CtxrRetriever(index_dir=examples_index.index_dir, k=5, filters=FILTERS)
    with closing(filtered):
        _check(filtered.invoke("cache"), expected["filtered"])


class TestServed:
    def test_base_url_sync_and_async_match_the_embedded_hits(
        self, served_url: str, expected: Expected
    ) -> None:
        retriever = CtxrRetriever(base_url=served_url, api_token=TOKEN, k=3)
        _check(retriever.invoke(QUERY), expected["plain"])
        for _ in range(2):  # one event loop after another: no client is kept from the first
            _check(asyncio.run(retriever.ainvoke(QUERY)), expected["plain"])
        assert len(retriever.invoke(QUERY, k=1)) == 1  # k for this call alone
        assert len(asyncio.run(retriever.ainvoke(QUERY, k=2))) == 2
        filtered = CtxrRetriever(base_url=served_url, api_token=TOKEN, k=5, filters=FILTERS)
        _check(filtered.invoke("cache"), expected["filtered"])
        retriever.close()

    def test_a_wrong_token_or_a_bad_filter_says_what_the_server_said(self, served_url: str) -> None:
        with pytest.raises(ProviderError, match=r"401.*bearer token") as refused:
            CtxrRetriever(base_url=served_url, api_token="wrong").invoke(QUERY)
        assert refused.value.status == 401 and not refused.value.retryable
        bad = CtxrRetriever(base_url=served_url, api_token=TOKEN, filters={"colour": "red"})
        with pytest.raises(ProviderError, match=r"422.*colour"):
            bad.invoke(QUERY)


def test_nothing_listening_is_a_clear_error() -> None:
    retriever = CtxrRetriever(base_url="http://127.0.0.1:9", timeout=5)
    with pytest.raises(ProviderError, match=r"cannot reach ctxr serve at http://127.0.0.1:9"):
        retriever.invoke(QUERY)
    with pytest.raises(ProviderError, match="is it running"):
        asyncio.run(retriever.ainvoke(QUERY))


def test_construction_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"exactly one of index_dir= .* or base_url="):
        CtxrRetriever()
    with pytest.raises(ConfigError, match="exactly one"):
        CtxrRetriever(index_dir=tmp_path, base_url="http://127.0.0.1:8000")
    with pytest.raises(ValidationError, match="k"):
        CtxrRetriever(index_dir=tmp_path, k=0)
    with pytest.raises(ValidationError, match="mode"):
        CtxrRetriever(index_dir=tmp_path, mode=FUZZY)
    with pytest.raises(IndexNotFoundError, match=str(tmp_path / "none")):
        CtxrRetriever(index_dir=tmp_path / "none").invoke(QUERY)
    with pytest.raises(ConfigError, match="query must be a non-empty string"):
        CtxrRetriever(index_dir=tmp_path / "none").invoke("  ")
    with pytest.raises(ConfigError, match=r"unknown search option\(s\) \['top_n'\]"):
        CtxrRetriever(index_dir=tmp_path / "none").invoke(QUERY, top_n=3)
    with pytest.raises(ConfigError, match="k must be at least 1"):
        CtxrRetriever(index_dir=tmp_path / "none").invoke(QUERY, k=0)
