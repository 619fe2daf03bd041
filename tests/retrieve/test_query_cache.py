"""The query vector cache: a repeated query is not embedded again, in a real search service over
the examples index with the real local embedder, and the cache's own bounds and keys."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from ctxr.errors import ConfigError
from ctxr.index.embed.base import Embedder, EmbedderWrapper, FloatMatrix
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.retrieve.query_cache import QueryVectorCache
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.index import BuiltIndex


class CountingEmbedder(EmbedderWrapper):
    """An embedder as it is, with the texts it was asked to embed written down."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.asked.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def minilm() -> OnnxEmbedder:
    return OnnxEmbedder()


def test_a_repeated_query_is_not_embedded_again(
    examples_index: BuiltIndex, minilm: OnnxEmbedder
) -> None:
    counting = CountingEmbedder(minilm)
    with SearchService(examples_index.settings, embedder=counting) as service:
        first = service.search("how do I restore a backup?", k=5)
        assert counting.asked == ["how do I restore a backup?"]
        again = service.search("how do I restore a backup?", k=5)
        dense = service.search("how do I restore a backup?", k=5, mode="dense")
        assert counting.asked == ["how do I restore a backup?"]  # no second embedding
        assert [(h.chunk_id, h.score) for h in again] == [(h.chunk_id, h.score) for h in first]
        assert dense and dense[0].scores["dense"].score > 0

        service.search("what is the default thumbnail cache size?", k=5)
        assert counting.asked[1:] == ["what is the default thumbnail cache size?"]
        service.search("how do I restore a backup?", k=5, mode="bm25")  # BM25 embeds nothing
        assert len(counting.asked) == 2


def test_a_cached_vector_is_the_embedders_own(
    examples_index: BuiltIndex, minilm: OnnxEmbedder
) -> None:
    query = "which port does the server listen on?"

    def top(service: SearchService) -> tuple[str, float]:
        best = service.retrieve([query], "dense", 3)[0]["dense"][0]
        return best.point_id, best.score

    with SearchService(examples_index.settings, embedder=minilm) as service:
        cold, warm = top(service), top(service)  # embedded, then read from the cache
    settings = examples_index.settings_with(query_cache_size=0)
    with SearchService(settings, embedder=minilm) as uncached:
        fresh = top(uncached)
    assert cold == warm
    assert cold[0] == fresh[0] and cold[1] == pytest.approx(fresh[1], abs=1e-6)


def test_size_zero_embeds_every_search(examples_index: BuiltIndex, minilm: OnnxEmbedder) -> None:
    counting = CountingEmbedder(minilm)
    settings = examples_index.settings_with(query_cache_size=0)
    with SearchService(settings, embedder=counting) as service:
        for _ in range(3):
            service.search("how do I restore a backup?", k=5)
    assert counting.asked == ["how do I restore a backup?"] * 3


def test_a_batch_embeds_each_new_text_once_and_reads_the_others() -> None:
    embedder, cache = HashEmbedder(), QueryVectorCache(16)
    cache.embed(embedder, ["alpha beta"])
    out = cache.embed(embedder, ["gamma", "alpha beta", "gamma", "delta"])
    assert embedder.calls == 2 and embedder.texts_embedded == 1 + 2  # gamma once, delta once
    np.testing.assert_array_equal(out, embedder.embed(["gamma", "alpha beta", "gamma", "delta"]))
    assert (cache.hits, cache.misses, len(cache)) == (1, 3, 3)


def test_the_least_recently_used_query_goes_first() -> None:
    embedder, cache = HashEmbedder(), QueryVectorCache(2)
    for text in ("a", "b", "a", "c"):  # "a" was used after "b": "b" makes room for "c"
        cache.embed(embedder, [text])
    assert len(cache) == 2 and embedder.texts_embedded == 3
    cache.embed(embedder, ["a"])
    cache.embed(embedder, ["c"])
    assert embedder.texts_embedded == 3
    cache.embed(embedder, ["b"])
    assert embedder.texts_embedded == 4 and len(cache) == 2


def test_another_embedder_does_not_read_the_first_ones_vectors() -> None:
    cache = QueryVectorCache(8)
    small, large = HashEmbedder(dim=32), HashEmbedder(dim=64)
    cache.embed(small, ["same text"])
    out = cache.embed(large, ["same text"])
    assert large.texts_embedded == 1 and out.shape == (1, 64)


def test_a_caller_cannot_change_what_the_cache_keeps() -> None:
    embedder, cache = HashEmbedder(), QueryVectorCache(4)
    first = cache.embed(embedder, ["x y"])
    first[0] = 0.0  # the caller's rows are its own
    np.testing.assert_array_equal(cache.embed(embedder, ["x y"]), embedder.embed(["x y"]))


def test_concurrent_searches_share_the_cache_within_its_bound() -> None:
    embedder, cache = HashEmbedder(), QueryVectorCache(5)
    texts = [f"query number {i}" for i in range(12)]
    expected = embedder.embed(texts)
    wrong: list[int] = []
    start = threading.Barrier(8)

    def search(offset: int) -> None:
        start.wait()
        for turn in range(200):
            i = (offset + turn) % len(texts)
            if not np.array_equal(cache.embed(embedder, [texts[i]])[0], expected[i]):
                wrong.append(i)

    threads = [threading.Thread(target=search, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and len(cache) == 5
    assert cache.hits + cache.misses == 8 * 200


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ConfigError, match="0 \\(off\\) or more"):
        QueryVectorCache(-1)
