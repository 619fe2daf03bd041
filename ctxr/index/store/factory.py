"""Which store an index lives in: the embedded qdrant-edge shard under the index directory, or a
Qdrant server or cluster when `CTXR_QDRANT_URL` is set. The manifest stays a local file beside
them in both cases."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ctxr.config import StoreSettings
from ctxr.errors import ConfigError, IndexInUseError
from ctxr.index import owner
from ctxr.index.store.base import Store
from ctxr.index.store.edge import SHARD_DIR, EdgeStore, WriterSize

if TYPE_CHECKING:
    from ctxr.index.store.server import QdrantServerStore


def shard_path(index_dir: Path) -> Path:
    return index_dir / SHARD_DIR


def open_store(
    store: StoreSettings,
    index_dir: Path,
    dim: int | None = None,
    every_byte: bool = False,
    writer_points: int | None = None,
) -> Store:
    """The index's existing store; `dim` (the manifest's) is checked where the backend can.
    `every_byte`: the embedded shard's files are all read and compared with its seal.
    `writer_points`: an indexing run opens it, and the index holds that many points (the
    embedded shard sizes what it may merge from them: `ctxr.index.store.merge_cap`)."""
    if store.qdrant_url:
        return _server(store, "open", dim)
    writer = None if writer_points is None else WriterSize(writer_points, store.segment_points)
    try:
        return EdgeStore.open(
            shard_path(index_dir), store.hnsw_ef, every_byte, store.rescore, writer
        )
    except IndexInUseError as exc:
        served = owner.live_owner(index_dir)
        if served is None:
            raise
        raise IndexInUseError(owner.owned_message(index_dir, served, "open it")) from exc


def create_store(store: StoreSettings, index_dir: Path, dim: int) -> Store:
    if store.qdrant_url:
        index_dir.mkdir(parents=True, exist_ok=True)  # the manifest still lives here
        return _server(store, "create", dim)
    return EdgeStore.create(
        shard_path(index_dir),
        dim,
        store.hnsw_ef,
        store.quantization,
        store.segment_points,
        store.rescore,
    )


def drop_store(store: StoreSettings, index_dir: Path) -> None:
    """Delete the index's points for good (`--rebuild`): the shard dir or the collection."""
    if not store.qdrant_url:
        shutil.rmtree(shard_path(index_dir), ignore_errors=True)
        return
    _require_qdrant_client()
    from ctxr.index.store.server import QdrantServerStore
    from ctxr.index.store.server_client import connect, redact

    client = connect(store.qdrant_url, _api_key(store))
    try:
        QdrantServerStore.drop(client, store.qdrant_collection, redact(store.qdrant_url))
    finally:
        client.close()


def _server(store: StoreSettings, how: str, dim: int | None) -> QdrantServerStore:
    assert store.qdrant_url
    _require_qdrant_client()
    from ctxr.index.store.server import QdrantServerStore
    from ctxr.index.store.server_client import connect, redact
    from ctxr.index.store.server_writes import WritePolicy

    key = _api_key(store)
    client = connect(store.qdrant_url, key)
    where = redact(store.qdrant_url)
    name = store.qdrant_collection
    writes = WritePolicy(store.qdrant_write_parallel, store.qdrant_write_attempts)
    try:
        if how == "create":
            assert dim is not None
            return QdrantServerStore.create(
                client,
                name,
                dim,
                shards=store.qdrant_shards,
                replicas=store.qdrant_replicas,
                quantization=store.quantization,
                where=where,
                hnsw_ef=store.hnsw_ef,
                rescore=store.rescore,
                secret=key,
                writes=writes,
            )
        return QdrantServerStore.open(
            client,
            name,
            dim,
            where=where,
            hnsw_ef=store.hnsw_ef,
            rescore=store.rescore,
            secret=key,
            writes=writes,
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


def _api_key(store: StoreSettings) -> str | None:
    key = store.qdrant_api_key
    return key.get_secret_value() if key is not None else None
