"""`CachedEmbedder`: a second embed of the same texts is all cache hits, with the same vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ctxr.index.embed.base import Embedder
from ctxr.index.embed.cache import CachedEmbedder
from tests.fakes.hash_embedder import HashEmbedder


def test_hash_embedder_is_an_embedder() -> None:
    fake = HashEmbedder()
    assert isinstance(fake, Embedder)
    assert (fake.name, fake.dim, fake.max_tokens) == ("fake:hash-64", 64, 10_000)
    vectors = fake.embed(["Alpha beta", "alpha BETA", "gamma", ""])
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors[0], vectors[1])  # casefolded, deterministic
    assert fake.embed([]).shape == (0, 64)


def test_second_embed_is_all_hits_and_identical(tmp_path: Path) -> None:
    inner = HashEmbedder()
    texts = ["the thumbnail cache", "backup verify", "the thumbnail cache", "résumé 写真"]
    cached = CachedEmbedder(inner, tmp_path / "cache")
    try:
        assert (cached.name, cached.dim, cached.max_tokens) == ("fake:hash-64", 64, 10_000)
        first = cached.embed(texts)
        assert (cached.hits, cached.misses) == (0, 3)  # the duplicate is embedded once
        assert inner.texts_embedded == 3
        np.testing.assert_array_equal(first, inner.embed(texts))
        inner.texts_embedded = 0

        second = cached.embed(texts)
        assert (cached.hits, cached.misses) == (4, 3)
        assert inner.texts_embedded == 0  # nothing reached the model
        np.testing.assert_array_equal(second, first)

        mixed = cached.embed(["backup verify", "new text"])
        assert (cached.hits, cached.misses) == (5, 4)
        np.testing.assert_array_equal(mixed[0], first[1])
        assert cached.count_tokens("backup verify now") == 3  # counted by the embedder it wraps
    finally:
        cached.close()


def test_cache_persists_across_instances_and_is_keyed_by_model(tmp_path: Path) -> None:
    texts = ["persisted text", "another"]
    first = CachedEmbedder(HashEmbedder(), tmp_path / "cache")
    vectors = first.embed(texts)
    first.close()

    again = CachedEmbedder(HashEmbedder(), tmp_path / "cache")
    np.testing.assert_array_equal(again.embed(texts), vectors)
    assert (again.hits, again.misses) == (2, 0)
    again.close()

    wider = CachedEmbedder(HashEmbedder(dim=32), tmp_path / "cache")  # another model name
    assert wider.name == "fake:hash-32"
    assert wider.embed(texts).shape == (2, 32)
    assert (wider.hits, wider.misses) == (0, 2)
    wider.close()
