"""Where settings become parts: the embedder, the analyzer, the store and the index's identity.

The indexer and the search service both build their parts here, so an index is always read
with the same analyzer and embedder it was written with (or refused, see `Manifest`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctxr.config import Settings
from ctxr.errors import ConfigError
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.weights import Bm25Params
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.index.manifest import IndexSettings

if TYPE_CHECKING:
    pass


def make_embedder(settings: Settings, cached: bool = False) -> Embedder:
    """The configured embedder; `cached` puts it behind the on-disk embedding cache."""
    embedder: Embedder
    if settings.embed.embedder == "openai":
        from ctxr.index.embed.openai import DEFAULT_MODEL, OpenAIEmbedder  # imports the SDK

        key = settings.embed.embedding_api_key
        embedder = OpenAIEmbedder(
            model=settings.embed.embedding_model or DEFAULT_MODEL,
            dimensions=settings.embed.embedding_dimensions,
            api_key=key.get_secret_value() if key is not None else None,
            base_url=settings.embed.embedding_base_url,
            requests_per_minute=settings.embed.embedding_requests_per_minute,
            tokens_per_minute=settings.embed.embedding_tokens_per_minute,
        )
    elif settings.embed.embedding_model or settings.embed.embedding_dimensions:
        raise ConfigError(
            "CTXR_EMBEDDING_MODEL / CTXR_EMBEDDING_DIMENSIONS apply to CTXR_EMBEDDER=openai; "
            "set CTXR_EMBEDDER=openai, or unset them for the local embedder"
        )
    else:
        embedder = OnnxEmbedder(
            batch_size=settings.embed.embed_batch_size, threads=settings.embed.embed_threads
        )
    return with_cache(embedder, settings) if cached else embedder


def with_cache(embedder: Embedder, settings: Settings) -> Embedder:
    """`embedder` behind the index's on-disk embedding cache (closing it closes `embedder`)."""
    return CachedEmbedder(embedder, cache_dir(settings) / "embeddings")


def cache_dir(settings: Settings) -> Path:
    return settings.cache_dir or Path(settings.index_dir) / "cache"


def make_analyzer(settings: Settings) -> Bm25Analyzer:
    return Bm25Analyzer()


def bm25_params(settings: Settings) -> Bm25Params:
    return Bm25Params(k1=settings.store.bm25_k1, b=settings.store.bm25_b)


def index_settings(settings: Settings, embedder: Embedder, analyzer: Bm25Analyzer) -> IndexSettings:
    return IndexSettings(
        embedder=embedder.name,
        dim=embedder.dim,
        analyzer=analyzer.name,
        bm25_k1=settings.store.bm25_k1,
        bm25_b=settings.store.bm25_b,
        query_prefix=settings.embed.embedding_query_prefix,
        document_prefix=settings.embed.embedding_document_prefix,
    )


# The store: the embedded shard under the index dir, or a Qdrant server when CTXR_QDRANT_URL
# is set. The manifest stays a local file beside them in both cases.
