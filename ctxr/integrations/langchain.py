"""`CtxrRetriever`: a LangChain retriever over a ctxr index (`pip install 'ctxr[langchain]'`).

    from ctxr.integrations.langchain import CtxrRetriever
    retriever = CtxrRetriever(index_dir=".ctxr", k=5, filters={"source": "docs/"})
    docs = retriever.invoke("how do I restore a backup?")     # or await retriever.ainvoke(...)

Each `Document` holds the chunk's text as `page_content`, the chunk id as `id`, and the rest of
ctxr's hit (`ctxr.hits/1`) in `metadata` (source, doc_id, heading_path, start, end, pages,
context, score, rank, each retriever's own score, expanded, flags), so a chain can cite the
source, section and page.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from ctxr.client import Client
from ctxr.config import SearchMode
from ctxr.errors import ConfigError
from ctxr.retrieve.hits import hit_json
from ctxr.retrieve.searcher import SearchOptions, check_query
from ctxr.types import Hit

# What `invoke(query, k=1)` may set for one call: any search option. LangChain's own keywords
# (`verbose`, reaching the retriever with them) are not ours to refuse.
PER_CALL = frozenset(f.name for f in fields(SearchOptions) if f.name != "_")
LANGCHAIN_KEYWORDS = frozenset({"verbose"})


class CtxrRetriever(BaseRetriever):
    """Hybrid (dense + BM25) search of a ctxr index: `index_dir=` (embedded) or `base_url=`
    (a running `ctxr serve`; `api_token=` for its CTXR_API_TOKEN). `invoke(query, k=1)` and
    the other search options (mode, filters, merge, ...) apply to that call alone."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index_dir: str | Path | None = None
    base_url: str | None = None
    k: int = Field(default=4, ge=1)
    mode: SearchMode = "hybrid"
    filters: dict[str, Any] | None = None
    api_token: str | None = Field(default=None, repr=False)
    timeout: float = 30.0
    settings: dict[str, Any] = Field(
        default_factory=dict, description="ctxr settings for an embedded index (ctxr.config)"
    )
    _client: Client = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._client = Client(
            self.index_dir,
            self.base_url,
            api_token=self.api_token,
            timeout=self.timeout,
            **self.settings,
        )

    def _options(self, query: str, asked: dict[str, Any]) -> SearchOptions:
        check_query(query)
        unknown = sorted(set(asked) - PER_CALL - LANGCHAIN_KEYWORDS)
        if unknown:
            raise ConfigError(
                f"unknown search option(s) {unknown}; a call may set {', '.join(sorted(PER_CALL))}"
            )
        given = {key: value for key, value in asked.items() if key in PER_CALL}
        return SearchOptions.given(
            **{"k": self.k, "mode": self.mode, "filters": self.filters, **given}
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = self._client.search(query, self._options(query, kwargs))
        return [to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = await self._client.asearch(query, self._options(query, kwargs))
        return [to_document(h) for h in hits]

    def close(self) -> None:
        """Let the embedded index go (the process's last user closes it); the next search
        opens it again."""
        self._client.close()

    async def aclose(self) -> None:
        await self._client.aclose()


def to_document(hit: Hit) -> Document:
    data = hit_json(hit)
    metadata = {key: value for key, value in data.items() if key != "text"}
    return Document(page_content=hit.text, metadata=metadata, id=hit.chunk_id)
