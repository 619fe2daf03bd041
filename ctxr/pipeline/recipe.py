"""A document's recipe: the hash of everything that shapes its chunks and contexts.

The manifest records it per document; a document whose recipe changed is re-indexed. It hashes
settings, never module paths, so moving code never invalidates an index."""

from __future__ import annotations

import hashlib
import json

from ctxr.config import Settings, SplitSettings, StoreSettings
from ctxr.enrich.situate.contexts import ContextPlan


def document_recipe(settings: Settings, plan: ContextPlan, chunker_name: str) -> str:
    """Hash of everything that shapes a document's chunks and contexts."""
    shape = {
        "chunker": chunker_name,
        "chunk_tokens": settings.split.chunk_tokens,
        "chunk_overlap": settings.split.chunk_overlap,
        "encoding": settings.split.encoding,
        "context": plan.kind,
        "context_position": settings.embed.context_position,
        "prompt": plan.version,
    }
    # The chunking option; the default adds nothing, so indexes written before it stay current.
    if settings.split.chunking == "parent":
        shape |= {"chunking": "parent", "parent_tokens": settings.split.parent_tokens}
    elif settings.split.chunking == "semantic":
        shape |= {"chunking": "semantic", "semantic_percentile": settings.split.semantic_percentile}
    # Per-kind budgets and a non-default context reserve only when set, likewise.
    if budgets := settings.split.chunk_tokens_by_kind:
        shape["chunk_tokens_by_kind"] = budgets
    if (
        settings.split.context_reserve_tokens
        != SplitSettings.model_fields["context_reserve_tokens"].default
    ):
        shape["context_reserve_tokens"] = settings.split.context_reserve_tokens
    if not settings.split.cap_to_embedder:
        shape["cap_to_embedder"] = False
    if not settings.embed.split_identifiers:
        shape["split_identifiers"] = False
    if not settings.split.language_budgets:
        shape["language_budgets"] = False
    # Which documents carry a whole-document BM25 vector (`ctxr.index.bm25.documents`).
    if settings.store.doc_bm25_tokens != StoreSettings.model_fields["doc_bm25_tokens"].default:
        shape["doc_bm25_tokens"] = settings.store.doc_bm25_tokens
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]
