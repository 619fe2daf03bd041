"""Where settings become parts: the embedder, the analyzer, the store and the index's identity.

The indexer and the search service both build their parts here, so an index is always read
with the same analyzer and embedder it was written with (or refused, see `Manifest`).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ctxr.config import Settings
from ctxr.errors import ConfigError
from ctxr.index.analyzer import Bm25Analyzer
from ctxr.index.bm25 import Bm25Params
from ctxr.index.edge_store import EdgeStore
from ctxr.index.embed import Embedder, OnnxEmbedder
from ctxr.index.embed_cache import CachedEmbedder
from ctxr.index.manifest import IndexSettings
from ctxr.index.store import Store

if TYPE_CHECKING:
    from ctxr.index.server_store import QdrantServerStore

SHARD_DIR = "qdrant"


def make_embedder(settings: Settings, cached: bool = False) -> Embedder:
    """The configured embedder; `cached` puts it behind the on-disk embedding cache."""
    embedder: Embedder
    if settings.embedder == "openai":
        from ctxr.index.openai_embedder import DEFAULT_MODEL, OpenAIEmbedder  # imports the SDK

        embedder = OpenAIEmbedder(
            model=settings.embedding_model or DEFAULT_MODEL,
            dimensions=settings.embedding_dimensions,
            requests_per_minute=settings.embedding_requests_per_minute,
            tokens_per_minute=settings.embedding_tokens_per_minute,
        )
    elif settings.embedding_model or settings.embedding_dimensions:
        raise ConfigError(
            "CTXR_EMBEDDING_MODEL / CTXR_EMBEDDING_DIMENSIONS apply to CTXR_EMBEDDER=openai; "
            "set CTXR_EMBEDDER=openai, or unset them for the local embedder"
        )
    else:
        embedder = OnnxEmbedder(
            batch_size=settings.embed_batch_size, threads=settings.embed_threads
        )
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


# The store: the embedded shard under the index dir, or a Qdrant server when CTXR_QDRANT_URL
# is set. The manifest stays a local file beside them in both cases.


def open_store(settings: Settings, index_dir: Path, dim: int | None = None) -> Store:
    """The index's existing store; `dim` (the manifest's) is checked where the backend can."""
    if settings.qdrant_url:
        return _server(settings, "open", dim)
    return EdgeStore.open(shard_path(index_dir), settings.hnsw_ef)


def create_store(settings: Settings, index_dir: Path, dim: int) -> Store:
    if settings.qdrant_url:
        index_dir.mkdir(parents=True, exist_ok=True)  # the manifest still lives here
        return _server(settings, "create", dim)
    return EdgeStore.create(shard_path(index_dir), dim, settings.hnsw_ef)


def drop_store(settings: Settings, index_dir: Path) -> None:
    """Delete the index's points for good (`--rebuild`): the shard dir or the collection."""
    if not settings.qdrant_url:
        shutil.rmtree(shard_path(index_dir), ignore_errors=True)
        return
    _require_qdrant_client()
    from ctxr.index.server_store import QdrantServerStore, connect, redact

    client = connect(settings.qdrant_url, _api_key(settings))
    try:
        QdrantServerStore.drop(client, settings.qdrant_collection, redact(settings.qdrant_url))
    finally:
        client.close()


def _server(settings: Settings, how: str, dim: int | None) -> QdrantServerStore:
    assert settings.qdrant_url
    _require_qdrant_client()
    from ctxr.index.server_store import QdrantServerStore, connect, redact

    key = _api_key(settings)
    client = connect(settings.qdrant_url, key)
    where = redact(settings.qdrant_url)
    name = settings.qdrant_collection
    try:
        if how == "create":
            assert dim is not None
            return QdrantServerStore.create(
                client,
                name,
                dim,
                shards=settings.qdrant_shards,
                replicas=settings.qdrant_replicas,
                where=where,
                hnsw_ef=settings.hnsw_ef,
                secret=key,
            )
        return QdrantServerStore.open(
            client, name, dim, where=where, hnsw_ef=settings.hnsw_ef, secret=key
        )
    except BaseException:
        client.close()
        raise


def _require_qdrant_client() -> None:
    if importlib.util.find_spec("qdrant_client") is None:  # it comes with the `server` extra
        raise ConfigError(
            "CTXR_QDRANT_URL is set but qdrant-client is not installed; "
            "pip install 'ctxr[server]', or unset CTXR_QDRANT_URL for the embedded index"
        )


def _api_key(settings: Settings) -> str | None:
    key = settings.qdrant_api_key
    return key.get_secret_value() if key is not None else None
