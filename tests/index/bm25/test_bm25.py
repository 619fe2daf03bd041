"""BM25 sparse vectors: textbook BM25 computed here must equal what a real Qdrant shard scores."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import qdrant_edge as qe

from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.weights import (
    Bm25Params,
    SparseTerms,
    document_vector,
    query_vector,
    term_index,
    tf_weight,
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A lazy dog sleeps all day in the sun.",
    "Foxes are quick and clever animals; a fox hunts at night.",
    "The HTTPServer.handle_request method parses the request line and headers.",
    "def handle_request(self, request): return self.router.dispatch(request)",
    "Configure the server with parse_config_file before starting the HTTP listener.",
    "Tokyo (東京都) is the capital of Japan; 京都 is the old capital.",
    "BM25 ranks documents by term frequency and inverse document frequency.",
    "Inverse document frequency downweights common terms such as 'the'.",
    "Dense embeddings and BM25 are fused with reciprocal rank fusion.",
    "The getUserName helper returns the user name from the session.",
    "Session tokens expire after thirty minutes of inactivity.",
    "Running the indexer twice overwrites chunks instead of duplicating them.",
    "The runner runs every test; failing tests stop the run.",
    "Qdrant stores sparse vectors with an IDF modifier for BM25 scoring.",
    "Sparse vectors keep only the non-zero dimensions of a vector.",
    "A dog, a fox and a cat walk into a bar. The dog orders first.",
    "Caching the document in the prompt saves money on every chunk.",
    "Prompt caching needs a minimum document size to take effect.",
    "Term frequency saturates: the tenth occurrence of a term adds little.",
    "dog dog dog dog dog dog dog dog",
]

QUERIES = [
    "lazy dog",
    "quick fox",
    "handle request",
    "HTTPServer.handle_request",
    "inverse document frequency",
    "sparse vectors BM25",
    "東京",
    "prompt caching document",
    "running tests",
    "user name session",
]

PARAMS = Bm25Params(k1=1.2, b=0.75)


def lucene_idf(n_docs: int, doc_freq: int) -> float:
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def textbook_scores(docs: list[list[str]], query: list[str], avg_len: float) -> dict[int, float]:
    """Okapi BM25 written out from the formula, independent of ctxr.index.bm25.weights."""
    n_docs = len(docs)
    df = Counter(t for d in docs for t in set(d))
    k1, b = PARAMS.k1, PARAMS.b
    scores: dict[int, float] = {}
    for i, doc in enumerate(docs):
        tf = Counter(doc)
        s = 0.0
        for t in set(query):
            if tf[t]:
                idf = lucene_idf(n_docs, df[t])
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(doc) / avg_len))
        if s > 0:
            scores[i] = s
    return scores


@pytest.fixture(scope="module")
def analyzer() -> Bm25Analyzer:
    return Bm25Analyzer()


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory, analyzer: Bm25Analyzer) -> Iterator[Any]:
    config = qe.EdgeConfig(
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}
    )
    s = qe.EdgeShard.create(str(tmp_path_factory.mktemp("bm25") / "shard"), config)
    docs = [analyzer.terms(text) for text in CORPUS]
    avg_len = sum(map(len, docs)) / len(docs)
    points = []
    for i, terms in enumerate(docs):
        vec = document_vector(terms, avg_len, PARAMS)
        sparse = qe.SparseVector(vec.indices, vec.values)
        points.append(qe.Point(i, {"bm25": sparse}, {"i": i, "text": CORPUS[i]}))
    s.update(qe.UpdateOperation.upsert_points(points))
    yield s
    s.close()


def test_corpus_has_no_hash_collisions(analyzer: Bm25Analyzer) -> None:
    vocab = {t for text in CORPUS + QUERIES for t in analyzer.terms(text)}
    assert len({term_index(t) for t in vocab}) == len(vocab)


@pytest.mark.parametrize("query", QUERIES)
def test_qdrant_idf_scores_equal_textbook_bm25(
    shard: Any, analyzer: Bm25Analyzer, query: str
) -> None:
    docs = [analyzer.terms(text) for text in CORPUS]
    avg_len = sum(map(len, docs)) / len(docs)
    q_terms = analyzer.terms(query)
    expected = textbook_scores(docs, q_terms, avg_len)
    assert expected, f"query {query!r} should match something"

    qv = query_vector(q_terms)
    hits = shard.query(
        qe.QueryRequest(
            query=qe.Query.Nearest(qe.SparseVector(qv.indices, qv.values), using="bm25"),
            limit=len(CORPUS),
            with_payload=True,
        )
    )
    got = {int(h.payload["i"]): h.score for h in hits}
    assert set(got) == set(expected)
    for i, score in got.items():
        assert score == pytest.approx(expected[i], rel=1e-3)
    # Same ranking: Qdrant's order, scored by the textbook, is non-increasing (ties aside).
    textbook_in_qdrant_order = [expected[int(h.payload["i"])] for h in hits]
    assert textbook_in_qdrant_order == pytest.approx(
        sorted(expected.values(), reverse=True), rel=1e-3
    )


def test_exact_identifier_ranks_its_definition_first(shard: Any, analyzer: Bm25Analyzer) -> None:
    qv = query_vector(analyzer.terms("HTTPServer.handle_request"))
    hits = shard.query(
        qe.QueryRequest(
            query=qe.Query.Nearest(qe.SparseVector(qv.indices, qv.values), using="bm25"),
            limit=3,
            with_payload=True,
        )
    )
    assert hits[0].payload["i"] == 3


def test_term_index_is_stable() -> None:
    # Fixed values: these are part of the on-disk format (see term_index's docstring).
    assert term_index("bm25") == 565330437
    assert term_index("run") == 3365767514
    assert term_index("東京") == 3179978821
    assert all(0 <= term_index(t) < 2**32 for t in ["", "a", "x" * 1000])


def test_hash_collisions_merge_by_summing() -> None:
    a, b = "t15385", "t210367"  # a known 32-bit collision, found by brute force
    assert term_index(a) == term_index(b)
    q = query_vector([a, b, "other"])
    assert len(q.indices) == 2
    assert q.values[q.indices.index(term_index(a))] == 2.0
    d = document_vector([a, b], avg_len=2.0)
    assert d.indices == [term_index(a)]
    assert d.values == [pytest.approx(2 * tf_weight(1, 2, 2.0))]


def test_document_vector_weights() -> None:
    terms = ["dog", "dog", "cat"]
    vec = document_vector(terms, avg_len=3.0)
    assert vec.indices == sorted(set(vec.indices))
    by_index = dict(zip(vec.indices, vec.values, strict=True))
    # dl == avg_len: weight = tf*(k1+1)/(tf+k1)
    assert by_index[term_index("dog")] == pytest.approx(2 * 2.2 / (2 + 1.2))
    assert by_index[term_index("cat")] == pytest.approx(1.0)
    # Longer than average -> lower weight; b=0 ignores length.
    assert document_vector(["cat"] * 1 + ["x"] * 9, 3.0).values[0] < 1.0
    no_len = document_vector(["cat"] + ["x"] * 9, 3.0, Bm25Params(b=0.0))
    assert no_len.values[no_len.indices.index(term_index("cat"))] == pytest.approx(1.0)


def test_query_vector_counts_each_term_once() -> None:
    q = query_vector(["dog", "dog", "cat"])
    assert sorted(q.values) == [1.0, 1.0]
    assert q.indices == sorted({term_index("dog"), term_index("cat")})


def test_empty_inputs_and_bad_params() -> None:
    assert document_vector([], avg_len=10.0) == SparseTerms([], [])
    assert query_vector([]) == SparseTerms([], [])
    with pytest.raises(ValueError, match="avg_len"):
        document_vector(["x"], avg_len=0.0)
    with pytest.raises(ValueError):
        Bm25Params(b=1.5)
