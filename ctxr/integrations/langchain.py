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

from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from ctxr.config import SearchMode
from ctxr.integrations.backend import CtxrBackend, HitJson


class CtxrRetriever(BaseRetriever):
    """Hybrid (dense + BM25) search of a ctxr index: `index_dir=` (embedded) or `base_url=`
    (a running `ctxr serve`; `api_token=` for its CTXR_API_TOKEN)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index_dir: str | Path | None = None
    base_url: str | None = None
    k: int = Field(4, ge=1)
    mode: SearchMode = "hybrid"
    filters: dict[str, Any] | None = None
    api_token: str | None = Field(None, repr=False)
    timeout: float = 30.0
    settings: dict[str, Any] = Field(
        default_factory=dict, description="ctxr settings for an embedded index (ctxr.config)"
    )
    _backend: CtxrBackend = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._backend = CtxrBackend(
            self.index_dir,
            self.base_url,
            api_token=self.api_token,
            timeout=self.timeout,
            **self.settings,
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self._backend.search(query, self.k, self.mode, self.filters)
        return [to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = await self._backend.asearch(query, self.k, self.mode, self.filters)
        return [to_document(h) for h in hits]

    def close(self) -> None:
        """Close the embedded index (or the HTTP client); the next search reopens it."""
        self._backend.close()

    async def aclose(self) -> None:
        await self._backend.aclose()


def to_document(hit: HitJson) -> Document:
    metadata = {key: value for key, value in hit.items() if key != "text"}
    return Document(page_content=str(hit["text"]), metadata=metadata, id=str(hit["chunk_id"]))
