"""The local executor: split and embed in this process."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ctxr.config import Settings
from ctxr.index import components
from ctxr.index.embed.base import Embedder
from ctxr.index.store.base import Store
from ctxr.pipeline.chunking import Chunker, run_chunker
from ctxr.pipeline.executors.base import PointWriter, Split, split_documents
from ctxr.types import Document


class LocalExecutor:
    name = "local"

    def embedder(self, settings: Settings) -> Embedder:
        return components.make_embedder(settings)

    def split(
        self,
        documents: Sequence[Document],
        settings: Settings,
        chunker: Chunker | None,
        embedder: Embedder,
    ) -> Iterator[Split]:
        own, budget_for = run_chunker(settings, chunker, embedder)
        return split_documents(documents, own, budget_for)

    def point_writer(
        self, settings: Settings, store: Store, embedder: Embedder
    ) -> PointWriter | None:
        return None  # this process embeds and writes

    def close(self) -> None:
        return None
