"""`PoolEmbedder`: the local MiniLM's vector space at no embedding cost, for indexing at scale.

Embedding a million chunks with the local MiniLM takes most of a day on two cores; a benchmark
of what ctxr itself costs (walking, splitting, BM25, writing, HNSW, the manifest) must not be
that. `PoolEmbedder` answers for the real model instead:

* its identity is the real model's: name, dimension and input limit, and `count_tokens` is the
  real tokenizer's (the splitter sizes chunks with it, at its real cost), so an index built
  with it records the default embedder in its manifest and ``ctxr serve`` opens it with the
  default embedder, which embeds the queries for real;
* each text's vector is a vector of a pool of real MiniLM embeddings of real texts (`pool`,
  the paragraphs of this repository's documentation, `pool_texts`), chosen by a hash of the
  text, plus noise also chosen by the hash (the sum of three rows of fixed Gaussian tables,
  each with a sign: 4096**3 * 8 combinations), of norm about `NOISE`, renormalised: cosine
  about 0.9 to its pool vector. The same text always gets the same vector (the embedding
  cache and an update see what a real model gives them), and no two chunks share one.

The vectors are SYNTHETIC: clusters around real embeddings, not the embeddings of the chunks'
texts. Search latency depends on their geometry only mildly; recall on them means nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common.checkout import REPO
from bench.common.synthetic import NOISE
from ctxr.index.embed.base import Embedder, EmbedderWrapper, FloatMatrix

TABLE_ROWS = 4096  # rows of each noise table (12 bits of the hash)
TABLES = 3
_PARAGRAPH = re.compile(r"\n\s*\n")
_NOT_PROSE = ("|", "```", "<", "#", "    ", "-", "*", "!", "[")


def pool_texts(count: int) -> list[str]:
    """The first `count` prose paragraphs (12 words or more) of this repository's docs/, in
    path order: real English about the software, as a user's notes are."""
    found: dict[str, None] = {}
    for path in sorted((REPO / "docs").rglob("*.md")):
        for paragraph in _PARAGRAPH.split(path.read_text(encoding="utf-8")):
            text = " ".join(paragraph.split())
            if len(text.split()) >= 12 and not text.startswith(_NOT_PROSE):
                found[text] = None
                if len(found) == count:
                    return list(found)
    raise SystemExit(f"docs/ has {len(found)} prose paragraphs, fewer than a pool of {count}")


def embed_pool(embedder: Embedder, count: int, path: Path) -> FloatMatrix:
    """The pool of `count` real vectors, read from `path` (``.npy``) when it holds them, else
    embedded with `embedder` and saved there."""
    if path.exists():
        pool: FloatMatrix = np.load(path)
        if pool.shape == (count, embedder.dim):
            return pool
    pool = embedder.embed(pool_texts(count)).astype(np.float32)
    np.save(path, pool)
    return pool


class PoolEmbedder(EmbedderWrapper):
    """Answers as `model` does (name, dim, max_tokens, count_tokens) with vectors of `pool`
    plus noise chosen by each text's hash (see the module's docstring); `model` never embeds."""

    def __init__(self, pool: FloatMatrix, model: Embedder, seed: int = 7) -> None:
        if pool.ndim != 2 or pool.shape[1] != model.dim:
            raise ValueError(f"pool of shape {pool.shape} for a model of dim {model.dim}")
        super().__init__(model)
        self._pool = np.asarray(pool, dtype=np.float32)
        dim = model.dim
        rng = np.random.default_rng(seed)
        # Three tables summed: variance TABLES * sigma^2, so each row's sigma keeps the
        # noise's expected norm at NOISE.
        sigma = NOISE / np.sqrt(dim * TABLES)
        self._tables = (rng.standard_normal((TABLES, TABLE_ROWS, dim)) * sigma).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        digests = b"".join(
            hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            for t in texts
        )
        words = np.frombuffer(digests, dtype="<u8").reshape(len(texts), 2)
        rows = self._pool[words[:, 0] % len(self._pool)].copy()
        bits = words[:, 1]
        for table in range(TABLES):
            index = (bits >> np.uint64(12 * table)) % TABLE_ROWS
            sign = np.where((bits >> np.uint64(48 + table)) & np.uint64(1), 1.0, -1.0)
            rows += self._tables[table][index] * sign[:, None].astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return rows

    def close(self) -> None:
        self.close_inner()
