"""`QueryVectorCache`: the dense vectors of recent queries, kept in memory by a search service.

A served index sees the same queries again (a page searched twice, an agent repeating itself,
a client that pages through k), and each costs an embedding: several milliseconds of CPU with
the local MiniLM, a round trip with an HTTP embedder. The service keeps the vectors of the last
`size` distinct queries (`CTXR_QUERY_CACHE_SIZE`), the least recently used dropped first.

The key is the embedder's identity (name, dimension and input limit, what the manifest and the
on-disk embedding cache tell models apart by) and a SHA-256 of the exact text embedded, not the
text itself: memory is bounded by ``size`` entries of one vector (``dim`` float32s) and a fixed
key each, however long the queries are. Thread-safe: the HTTP API searches from a thread pool.
The lock is held only to read and to store; misses are embedded outside it, in one batch per
call, so a slow embedding never holds other searches up (two threads that miss the same text
at once both embed it, and store the same vector).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ctxr.errors import ConfigError
from ctxr.index.embed.base import Embedder, FloatMatrix

# (embedder name, dim, max_tokens, SHA-256 of the text)
Key = tuple[str, int, int, bytes]


class QueryVectorCache:
    """The last `size` query vectors, least recently used out first; `size` 0 keeps none."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ConfigError(f"query cache size must be 0 (off) or more, got {size}")
        self.size = size
        self._entries: OrderedDict[Key, FloatMatrix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> FloatMatrix:
        """`embedder.embed(texts)`, with the texts seen before read from the cache: only the
        others reach the embedder, each distinct text once."""
        if self.size == 0 or not texts:
            return embedder.embed(texts)
        identity = (embedder.name, embedder.dim, embedder.max_tokens)
        keys = [(*identity, _digest(text)) for text in texts]
        out = np.empty((len(texts), embedder.dim), dtype=np.float32)
        missing: dict[Key, list[int]] = {}
        with self._lock:
            for row, key in enumerate(keys):
                vector = self._entries.get(key)
                if vector is None:
                    missing.setdefault(key, []).append(row)
                else:
                    self._entries.move_to_end(key)
                    out[row] = vector
            self.hits += len(texts) - sum(len(rows) for rows in missing.values())
            self.misses += len(missing)
        if not missing:
            return out
        fresh = embedder.embed([texts[rows[0]] for rows in missing.values()])
        with self._lock:
            for vector, (key, rows) in zip(fresh, missing.items(), strict=True):
                out[rows] = vector
                kept = np.array(vector, dtype=np.float32)  # a copy no caller can change
                kept.setflags(write=False)
                self._entries[key] = kept
                self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return out


def _digest(text: str) -> bytes:
    # surrogatepass: a JSON query may carry a lone surrogate ("\ud800"), which plain UTF-8
    # refuses; it still has one exact encoding to hash.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
