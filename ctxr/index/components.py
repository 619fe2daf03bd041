"""Where settings become parts: the embedder, the analyzer and the index's identity.

The indexer and the search service both build their parts here, so an index is always read
with the same analyzer and embedder it was written with (or refused, see `Manifest`).
"""

from __future__ import annotations

from pathlib import Path

from ctxr.config import Settings
from ctxr.index.analyzer import Bm25Analyzer
from ctxr.index.bm25 import Bm25Params
from ctxr.index.embed import Embedder, OnnxEmbedder
from ctxr.index.embed_cache import CachedEmbedder
from ctxr.index.manifest import IndexSettings

SHARD_DIR = "qdrant"


def make_embedder(settings: Settings, cached: bool = False) -> Embedder:
    """The configured embedder; `cached` puts it behind the on-disk embedding cache."""
    embedder = OnnxEmbedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    if not cached:
        return embedder
    return CachedEmbedder(embedder, cache_dir(settings) / "embeddings")


def cache_dir(settings: Settings) -> Path:
    return settings.cache_dir or Path(settings.index_dir) / "cache"


def make_analyzer(settings: Settings) -> Bm25Analyzer:
    return Bm25Analyzer()


def bm25_params(settings: Settings) -> Bm25Params:
    return Bm25Params(k1=settings.bm25_k1, b=settings.bm25_b)


def index_settings(settings: Settings, embedder: Embedder, analyzer: Bm25Analyzer) -> IndexSettings:
    return IndexSettings(
        embedder=embedder.name,
        dim=embedder.dim,
        analyzer=analyzer.name,
        bm25_k1=settings.bm25_k1,
        bm25_b=settings.bm25_b,
    )


def shard_path(index_dir: Path) -> Path:
    return index_dir / SHARD_DIR
