"""LangChain's own standard retriever suite (`langchain-tests`'s `RetrieversIntegrationTests`)
on `ctxr.integrations.langchain.CtxrRetriever`: on the embedded examples index and through a
real `ctxr serve` (`base_url=`). The suite is LangChain's, unchanged: it builds several
retrievers on one index in one process, never closes them, and asks for `k` per call.

Its async test needs pytest-asyncio, whose mark this module sets on it alone."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import pytest

from tests.fixtures.index import BuiltIndex

pytest.importorskip("langchain_tests", reason="pip install 'ctxr[frameworks-test]'")
pytest.importorskip("pytest_asyncio", reason="pip install 'ctxr[frameworks-test]'")

from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from ctxr.integrations.langchain import CtxrRetriever
from tests.fixtures.integrations import QUERY, TOKEN

# The suite's async tests run on pytest-asyncio. They are marked where they are defined (an
# override in a subclass is refused by the suite itself), so no other test of the run is
# touched by the plugin and its default strict mode stays as it is.
for _name, _test in vars(RetrieversIntegrationTests).items():
    if _name.startswith("test_") and inspect.iscoroutinefunction(_test):
        pytest.mark.asyncio(_test)


class _CtxrStandard(RetrieversIntegrationTests):
    params: ClassVar[dict[str, Any]] = {}

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return CtxrRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestEmbedded(_CtxrStandard):
    @pytest.fixture(autouse=True, scope="class")
    def _index(self, examples_index: BuiltIndex) -> None:
        type(self).params = {
            "index_dir": examples_index.index_dir,
            "settings": {"cache_dir": examples_index.cache_dir},
        }


class TestServed(_CtxrStandard):
    @pytest.fixture(autouse=True, scope="class")
    def _server(self, served_url: str) -> None:
        type(self).params = {"base_url": served_url, "api_token": TOKEN}
