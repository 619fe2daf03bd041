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

from ctxr.integrations.backend import CtxrBackend, HitJson

# Bookkeeping in the metadata that helps neither an LLM's answer nor an embedding.
_NOT_FOR_MODELS = [
    "chunk_id", "doc_id", "start", "end", "rank", "score", "scores", "expanded", "flags",
]  # fmt: skip


class CtxrRetriever(BaseRetriever):
    """Hybrid (dense + BM25) search of a ctxr index: `index_dir=` (embedded) or `base_url=`
    (a running `ctxr serve`; `api_token=` for its CTXR_API_TOKEN)."""

    def __init__(
        self,
        index_dir: str | Path | None = None,
        base_url: str | None = None,
        *,
        k: int = 4,
        mode: str = "hybrid",
        filters: dict[str, Any] | None = None,
        api_token: str | None = None,
        timeout: float = 30.0,
        callback_manager: CallbackManager | None = None,
        **settings: Any,
    ) -> None:
        self._backend = CtxrBackend(
            index_dir, base_url, api_token=api_token, timeout=timeout, **settings
        )
        self.k = k
        self.mode = mode
        self.filters = filters
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._backend.search(query_bundle.query_str, self.k, self.mode, self.filters)
        return [to_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self._backend.asearch(query_bundle.query_str, self.k, self.mode, self.filters)
        return [to_node(h) for h in hits]

    def close(self) -> None:
        """Close the embedded index (or the HTTP client); the next search reopens it."""
        self._backend.close()

    async def aclose(self) -> None:
        await self._backend.aclose()


def to_node(hit: HitJson) -> NodeWithScore:
    metadata = {key: value for key, value in hit.items() if key != "text"}
    node = TextNode(
        id_=str(hit["chunk_id"]),
        text=str(hit["text"]),
        metadata=metadata,
        start_char_idx=int(hit["start"]),
        end_char_idx=int(hit["end"]),
        excluded_llm_metadata_keys=list(_NOT_FOR_MODELS),
        excluded_embed_metadata_keys=list(_NOT_FOR_MODELS),
    )
    return NodeWithScore(node=node, score=float(hit["score"]))
