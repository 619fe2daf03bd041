"""What the page marks in a hit: the words that share a BM25 term with the query."""

from __future__ import annotations

from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.retrieve.highlight import matches

ANALYZER = Bm25Analyzer()


def _marked(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[start:end] for start, end in spans]


def test_words_are_matched_as_bm25_reads_them() -> None:
    text = "The HTTPServer.handle_request holds migration locks. Locked? The end."
    found = matches(ANALYZER, "Handle requests; migrations lock", [text])
    assert found.terms == ["handl", "request", "migrat", "lock"]  # stemmed, in order, once
    assert _marked(text, found.spans[0]) == [
        "HTTPServer.handle_request", "migration", "locks", "Locked"
    ]  # fmt: skip


def test_stop_words_and_an_empty_query_mark_nothing() -> None:
    assert matches(ANALYZER, "the of", ["the end of it"]).spans == [[]]
    assert matches(ANALYZER, "", ["anything"]).spans == [[]]


def test_cjk_bigrams_are_joined_and_offsets_are_code_points() -> None:
    text = "💥 東京都に住む"
    found = matches(ANALYZER, "東京都", [text, "京都"])
    assert _marked(text, found.spans[0]) == ["東京都"]  # two overlapping bigrams, one mark
    assert found.spans[1] == [(0, 2)]


def test_term_spans_give_the_terms_that_terms_gives() -> None:
    text = "getUser reads HTTPServer.handle_request in 東京都, then 京."
    from_spans = [t for _, _, terms in ANALYZER.term_spans(text) for t in terms]
    assert from_spans == ANALYZER.terms(text)
