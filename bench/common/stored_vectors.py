"""Every point's vectors read back from a ctxr index: real embeddings to build on.

`DEFAULT_INDEX` is where ``ctxr eval`` leaves its SciFact index (SciFact's 5,183 abstracts split
by ctxr at 200 tokens, no context, embedded with the local MiniLM): 12,341 real chunk vectors.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import qdrant_edge as qe

from ctxr.index.bm25.weights import SparseTerms
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import DENSE_VECTOR, SPARSE_VECTOR

# The name `ctxr eval beir --index-dir /tmp/evalidx` gives it (with the whole-document BM25 size).
DEFAULT_INDEX = Path("/tmp/evalidx/scifact-ours200-none-bm25-1.2-0.75-doc1024")
Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class StoredVectors:
    ids: list[str]
    dense: Matrix
    sparse: list[SparseTerms]


def read_vectors(index_dir: Path) -> StoredVectors:
    """Every point's dense and sparse vector, read from a copy (the original may be in use)."""
    with tempfile.TemporaryDirectory(prefix="ctxr-vectors-") as tmp:
        copy = Path(tmp) / "shard"
        shutil.copytree(store_factory.shard_path(index_dir), copy)
        shard = qe.EdgeShard.load(str(copy))
        ids: list[str] = []
        dense: list[list[float]] = []
        sparse: list[SparseTerms] = []
        offset = None
        try:
            while True:
                request = qe.ScrollRequest(
                    offset=offset, limit=2000, with_payload=False, with_vector=True
                )
                records, offset = shard.scroll(request)
                for record in records:
                    vectors: Any = record.vector  # {name: list[float] | SparseVector}
                    ids.append(str(record.id))
                    dense.append(vectors[DENSE_VECTOR])
                    sv = vectors[SPARSE_VECTOR]
                    sparse.append(SparseTerms(list(sv.indices), list(sv.values)))
                if offset is None:
                    break
        finally:
            shard.close()
    return StoredVectors(ids, np.asarray(dense, dtype=np.float32), sparse)
