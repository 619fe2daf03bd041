"""The index's stats as the API answers them (GET /stats, and the MCP server's stats resource)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime

from ctxr.api.models import StatsResponse
from ctxr.config import Settings
from ctxr.retrieve.service import SearchService


def stats_response(service: SearchService, settings: Settings) -> StatsResponse:
    """Points, documents, the settings the index was built with, search limits and age."""
    base = service.stats()
    updated = datetime.fromisoformat(service.manifest.updated_at)
    return StatsResponse(
        index_dir=base["index_dir"],
        backend="qdrant-server" if settings.store.qdrant_url else "edge",
        points=base["points"],
        documents=base["documents"],
        settings=asdict(service.manifest.settings),
        search={
            "fusion": settings.search.fusion,
            "rrf_k": settings.search.rrf_k,
            "candidates": settings.search.candidates,
            "max_query_chars": settings.api.api_max_query_chars,
            "max_k": settings.api.api_max_k,
            "max_batch": settings.api.api_max_batch,
            "max_candidates": settings.api.api_max_candidates,
            "max_body_bytes": settings.api.api_max_body_bytes,
            "max_rerank_queries": settings.api.api_max_rerank_queries,
        },
        created_at=service.manifest.created_at,
        updated_at=service.manifest.updated_at,
        age_seconds=round((datetime.now(UTC) - updated).total_seconds(), 1),
    )
