"""`CtxrRetriever`: a LlamaIndex retriever over a ctxr index (`pip install 'ctxr[llama-index]'`).

    from ctxr.integrations.llama_index import CtxrRetriever
    retriever = CtxrRetriever(index_dir=".ctxr", k=5)
    nodes = retriever.retrieve("how do I restore a backup?")  # or await retriever.aretrieve(...)
    engine = RetrieverQueryEngine.from_args(retriever, llm=...)  # as any retriever

Each `NodeWithScore` holds a `TextNode` whose id is the chunk id, whose text is the chunk,
whose `start_char_idx`/`end_char_idx` are its offsets in the document, and whose metadata is
the rest of ctxr's hit. What an LLM sees of the metadata is the source, the heading trail and
the chunk's context; ids, offsets and scores are kept from the prompt and from embeddings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ctxr.client import Client
from ctxr.config import SearchMode
from ctxr.retrieve.hits import hit_json
from ctxr.retrieve.searcher import SearchOptions, check_query
from ctxr.types import Hit

# Bookkeeping in the metadata that helps neither an LLM's answer nor an embedding.
_NOT_FOR_MODELS = [
    "chunk_id", "doc_id", "start", "end", "rank", "score", "scores", "expanded", "flags",
]  # fmt: skip


class CtxrRetriever(BaseRetriever):
    """Hybrid (dense + BM25) search of a ctxr index: `index_dir=` (embedded) or `base_url=`
    (a running `ctxr serve`; `api_token=` for its CTXR_API_TOKEN). LlamaIndex's `retrieve`
    takes the query alone, so `k` and the other options are the retriever's (`options`
    holds them all; change `k` or `options` between calls to search differently)."""

    def __init__(
        self,
        index_dir: str | Path | None = None,
        base_url: str | None = None,
        *,
        k: int = 4,
        mode: SearchMode = "hybrid",
        filters: dict[str, Any] | None = None,
        api_token: str | None = None,
        timeout: float = 30.0,
        callback_manager: CallbackManager | None = None,
        **settings: Any,
    ) -> None:
        self._client = Client(index_dir, base_url, api_token=api_token, timeout=timeout, **settings)
        self.options = SearchOptions(k, mode, filters=filters)  # refused here if out of bounds
        super().__init__(callback_manager=callback_manager)

    @property
    def k(self) -> int:
        return self.options.k

    @k.setter
    def k(self, value: int) -> None:
        self.options = self.options.with_(k=value)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = check_query(query_bundle.query_str)
        return [to_node(h) for h in self._client.search(query, self.options)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = check_query(query_bundle.query_str)
        return [to_node(h) for h in await self._client.asearch(query, self.options)]

    def close(self) -> None:
        """Let the embedded index go (the process's last user closes it); the next search
        opens it again."""
        self._client.close()

    async def aclose(self) -> None:
        await self._client.aclose()


def to_node(hit: Hit) -> NodeWithScore:
    data = hit_json(hit)
    metadata = {key: value for key, value in data.items() if key != "text"}
    node = TextNode(
        id_=hit.chunk_id,
        text=hit.text,
        metadata=metadata,
        start_char_idx=hit.start,
        end_char_idx=hit.end,
        excluded_llm_metadata_keys=list(_NOT_FOR_MODELS),
        excluded_embed_metadata_keys=list(_NOT_FOR_MODELS),
    )
    return NodeWithScore(node=node, score=hit.score)
