"""Before a run pays for contexts or writes the index: is there room on the disk?

qdrant-edge writes its shard through memory-mapped files. On a filesystem that runs out of
space, a write into a mapped page the filesystem cannot back kills the process with SIGBUS:
no exception, no message, and the LLM answers in flight lost. So a run checks first, once it
knows what it will index and before it asks the LLM anything: the space free where the index
lives (and where its caches live, when that is another filesystem) must cover an estimate of
what the run writes, plus `CTXR_MIN_FREE_MB` of headroom. Otherwise it stops with a
`StorageError` naming the directory, the space free and the estimate; nothing is paid, and the
index is left as it was.

The estimate is deliberately generous (about twice what was measured: 2.9 kB a point at 100k
points of 1 kB text and 384 dimensions, and 18 MB for a new shard's files on tmpfs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ctxr.disk import check_free
from ctxr.index.manifest import MANIFEST_NAME
from ctxr.types import Document

MB = 2**20
NEW_SHARD_BYTES = 32 * MB  # a new shard's files before its first point
OPEN_SHARD_BYTES = 4 * MB  # what a run over an existing shard may add besides its points
CHUNK_TEXT_BYTES = 1000  # a chunk's text, at most (fewer, larger chunks cost less)


def index_bytes(documents: Sequence[Document], dim: int, new_index: bool) -> int:
    """What writing `documents` may add to the index directory: points, payloads, the log."""
    text = sum(len(d.text.encode("utf-8")) for d in documents)
    points = sum(max(1, len(d.text) // CHUNK_TEXT_BYTES + 1) for d in documents)
    per_point = 6 * dim + 1024  # the vector, its BM25 vectors, ids, the log's copy
    base = NEW_SHARD_BYTES if new_index else OPEN_SHARD_BYTES
    return base + points * per_point + 2 * text  # the text and its context, twice (log)


def cache_bytes(documents: Sequence[Document], dim: int) -> int:
    """What the embedding and response caches may add: a vector and a context a chunk."""
    points = sum(max(1, len(d.text) // CHUNK_TEXT_BYTES + 1) for d in documents)
    return points * (4 * dim + 2048)


def check_room(
    index_dir: Path,
    cache_dir: Path,
    documents: Sequence[Document],
    dim: int,
    new_index: bool,
    headroom_mb: int,
) -> None:
    """Raise `StorageError` when the disks cannot take what the run would write (module doc)."""
    if headroom_mb <= 0 or not documents:
        return
    headroom = headroom_mb * MB
    index_need = index_bytes(documents, dim, new_index)
    cache_need = cache_bytes(documents, dim)
    if _same_filesystem(index_dir, cache_dir):
        check_free(index_dir, index_need + cache_need + headroom, "index")
        return
    check_free(index_dir, index_need + headroom, "index")
    check_free(cache_dir, cache_need + headroom, "caches")


def check_shard_room(index_dir: Path, rebuild: bool, headroom_mb: int) -> None:
    """Before a shard is created (no manifest yet, or `--rebuild`): room for its files."""
    if headroom_mb > 0 and (rebuild or not (index_dir / MANIFEST_NAME).exists()):
        check_free(index_dir, NEW_SHARD_BYTES + headroom_mb * MB, "index")


def _same_filesystem(a: Path, b: Path) -> bool:
    try:
        return os.stat(_existing(a)).st_dev == os.stat(_existing(b)).st_dev
    except OSError:
        return True


def _existing(path: Path) -> Path:
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe
