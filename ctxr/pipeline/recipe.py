"""A document's recipe: the hash of everything that shapes its chunks and contexts.

The manifest records it per document; a document whose recipe changed is re-indexed. It hashes
settings, never module paths, so moving code never invalidates an index."""

from __future__ import annotations

import hashlib
import json

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import ContextPlan


def document_recipe(settings: Settings, plan: ContextPlan, chunker_name: str) -> str:
    """Hash of everything that shapes a document's chunks and contexts."""
    shape = {
        "chunker": chunker_name,
        "chunk_tokens": settings.chunk_tokens,
        "chunk_overlap": settings.chunk_overlap,
        "encoding": settings.encoding,
        "context": plan.kind,
        "context_position": settings.context_position,
        "prompt": plan.version,
    }
    # The chunking option; the default adds nothing, so indexes written before it stay current.
    if settings.chunking == "parent":
        shape |= {"chunking": "parent", "parent_tokens": settings.parent_tokens}
    elif settings.chunking == "semantic":
        shape |= {"chunking": "semantic", "semantic_percentile": settings.semantic_percentile}
    # Per-kind budgets and a non-default context reserve only when set, likewise.
    if budgets := settings.chunk_tokens_by_kind:
        shape["chunk_tokens_by_kind"] = budgets
    if settings.context_reserve_tokens != Settings.model_fields["context_reserve_tokens"].default:
        shape["context_reserve_tokens"] = settings.context_reserve_tokens
    if not settings.cap_to_embedder:
        shape["cap_to_embedder"] = False
    if not settings.split_identifiers:
        shape["split_identifiers"] = False
    if not settings.language_budgets:
        shape["language_budgets"] = False
    # Which documents carry a whole-document BM25 vector (`ctxr.index.bm25.documents`).
    if settings.doc_bm25_tokens != Settings.model_fields["doc_bm25_tokens"].default:
        shape["doc_bm25_tokens"] = settings.doc_bm25_tokens
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]
