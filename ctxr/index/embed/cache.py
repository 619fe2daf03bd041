"""`CachedEmbedder`: any embedder behind a diskcache, keyed by model name and text hash.

Re-indexing a changed corpus, or re-running an evaluation, embeds only text it has not seen;
the rest is read back from disk (float32 bytes, no pickle). Safe across processes (diskcache
uses SQLite with proper locking).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ctxr.cache_files import cache_write, open_cache
from ctxr.index.embed.base import Embedder, EmbedderWrapper, FloatMatrix


class CachedEmbedder(EmbedderWrapper):
    """`owns_inner=False` leaves `inner` open on `close` (a server's search embedder)."""

    def __init__(self, inner: Embedder, directory: Path, owns_inner: bool = True) -> None:
        super().__init__(inner)
        self._owns_inner = owns_inner
        self._directory = Path(directory)
        self._cache = open_cache(self._directory, "embedding cache", size_limit=4 * 2**30)
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"{self.inner.name}:{self.inner.max_tokens}:{digest}"

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        out, missing = self.lookup(texts)
        if missing:
            self.keep(out, missing, self.inner.embed(list(missing)))
        return out

    def lookup(self, texts: Sequence[str]) -> tuple[FloatMatrix, dict[str, list[int]]]:
        """The vectors of `texts` the cache holds (rows of zeros for the rest), and each text
        it lacks with its rows: `embed`'s first half, for a caller that embeds the missing
        texts elsewhere (Ray actors) and hands them to `keep`."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for row, text in enumerate(texts):
            raw = self._cache.get(self._key(text))
            if isinstance(raw, bytes) and len(raw) == 4 * self.dim:
                out[row] = np.frombuffer(raw, dtype=np.float32)
            else:
                missing.setdefault(text, []).append(row)  # duplicates are embedded once
        self.hits += len(texts) - sum(len(rows) for rows in missing.values())
        self.misses += len(missing)
        return out, missing

    def keep(self, out: FloatMatrix, missing: dict[str, list[int]], fresh: FloatMatrix) -> None:
        """Cache `fresh`, the vectors of `missing`'s texts in its order, and put them in `out`."""
        with cache_write(self._directory, "embedding cache"):  # a full disk, named
            for vector, (text, rows) in zip(fresh, missing.items(), strict=True):
                self._cache.set(self._key(text), vector.astype(np.float32).tobytes())
                out[rows] = vector

    def close(self) -> None:
        self._cache.close()
        if self._owns_inner:
            self.close_inner()
