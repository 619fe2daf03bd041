"""The `Executor` protocol, and splitting a batch of documents: the work an executor places."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Protocol

from ctxr.config import Settings
from ctxr.enrich.split.inflation import LanguageBudget
from ctxr.index.embed.base import Embedder
from ctxr.index.store.base import Store, StoredPoint
from ctxr.pipeline.chunking import BudgetedChunker, Chunker
from ctxr.types import Chunk, Document

Split = tuple[Document, list[Chunk]]


class PendingWrite(Protocol):
    """A batch handed to a `PointWriter`, being embedded and written."""

    def wait(self, advance: Callable[[int], None]) -> None:
        """Return once the store has acknowledged every point of the batch; raise the
        writer's error (a ctxr error that names where it happened) if it failed. Meanwhile
        `advance(n)` is called as the workers finish n of the batch's points (the run's
        progress bar moves with each worker, not once a batch)."""
        ...


class PointWriter(Protocol):
    """Embeds chunks on workers and writes their points, while the driver prepares the next
    batch: Ray actors that upsert straight to a Qdrant server (vectors never travel through
    the driver), or Ray actors that embed for a store the driver alone holds (the embedded
    shard), which the driver then writes. The driver still deletes a document's old points
    before and records the manifest after (`ctxr.pipeline.write`)."""

    @property
    def by_workers(self) -> bool:
        """True where the workers upsert the points themselves, False where the driver does."""
        ...

    def submit(self, texts: Sequence[str], points: Sequence[StoredPoint]) -> PendingWrite:
        """Start embedding `texts` (longest first, as the run orders them) into the dense
        vectors of `points` (the rest of each point filled in) and upserting them; returns
        at once, so the driver prepares the next batch meanwhile."""
        ...


class Executor(Protocol):
    """Where a run splits and embeds. A run makes one, uses it, and closes it."""

    @property
    def name(self) -> str:
        """`local` or `ray`, said in the run's report."""
        ...

    def embedder(self, settings: Settings) -> Embedder:
        """The embedder the run writes with, before the embedding cache is put around it."""
        ...

    def split(
        self,
        documents: Sequence[Document],
        settings: Settings,
        chunker: Chunker | None,
        embedder: Embedder,
    ) -> Iterator[Split]:
        """Each document (its detected language set) with its chunks, in input order.
        `chunker` replaces ctxr's splitter when given; `embedder` is the run's."""
        ...

    def point_writer(
        self, settings: Settings, store: Store, embedder: Embedder
    ) -> PointWriter | None:
        """Who embeds and writes the points when the driver does not do both in turn (None:
        the driver embeds through `embedder`, the run's, and writes to `store` itself)."""
        ...

    def close(self) -> None: ...


def split_documents(
    documents: Sequence[Document],
    chunker: BudgetedChunker,
    budget_for: Callable[[Document], LanguageBudget],
) -> Iterator[Split]:
    """Split each document with its budget; the language that sizing detected goes into the
    document, whose payload keeps it. The one loop both executors run."""
    for document in documents:
        budget = budget_for(document)  # detects the language once, for both uses
        chunks = chunker(document, budget)
        if budget.language is not None:
            document = replace(document, natural_language=budget.language)
        yield document, chunks
