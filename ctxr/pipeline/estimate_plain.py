"""The estimate of a run without an LLM (`ctxr index --dry-run` with no provider configured):
outline contexts, or none, at no LLM cost, so what is left to say is how much there is to do
and to embed. Computed with the indexer's own recipe, chunks and outline contexts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import ContextPlan
from ctxr.enrich.situate.outline import situate
from ctxr.pipeline.recipe import document_recipe
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, ContextKind, Document

NO_MODEL_PRICED = (
    "no LLM model is priced: no provider is configured, so this run writes outline contexts "
    "(title, path, headings) at no LLM cost. To see what LLM contexts would cost, name a model: "
    "`ctxr estimate PATH --model claude-haiku-4-5 --model gpt-4o-mini`; to have `ctxr index` "
    "write them, set ANTHROPIC_API_KEY, or OPENAI_API_KEY / OPENAI_BASE_URL"
)


@dataclass(slots=True)
class PlainRun:
    """What a run with no LLM would do (`ctxr index --dry-run` with no provider configured):
    outline contexts, or none, at no LLM cost; only the local embedder's work is left."""

    context: str  # "outline" or "none"
    documents: int = 0  # to (re)index
    documents_unchanged: int = 0
    chunks: int = 0
    embedding_tokens: int = 0  # chunks with their contexts, in the chunking encoding
    embedding_dollars: float | None = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "documents": self.documents,
            "documents_unchanged": self.documents_unchanged,
            "chunks": self.chunks,
            "tokens": {"embedding": self.embedding_tokens},
            "dollars": {"llm": 0.0, "embedding": self.embedding_dollars},
        }


def plain_kind(settings: Settings) -> ContextKind:
    return "none" if settings.llm.context == "none" else "outline"


def plain_recipe(settings: Settings, chunker_name: str) -> str:
    """The recipe `build_index` records for a run without an LLM."""
    return document_recipe(settings, ContextPlan(plain_kind(settings)), chunker_name)


def plain_run(
    todo: Sequence[Document],
    total: int,
    settings: Settings,
    chunks: Callable[[str], list[Chunk]],
    embedder: str,
) -> PlainRun:
    """`todo`, the documents of `total` whose recipe or text changed, with outline contexts."""
    kind = plain_kind(settings)
    run = PlainRun(kind, len(todo), total - len(todo))
    for document in todo:
        situated = situate(document, chunks(document.doc_id), kind)
        run.chunks += len(situated)
        run.embedding_tokens += sum(
            count_tokens(c.indexed_text(), settings.split.encoding) for c in situated
        )
    run.embedding_dollars = 0.0 if embedder.startswith(("onnx:", "fake:")) else None
    return run
