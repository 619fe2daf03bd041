"""Which words of a text BM25 matched a query on, pure: what the page at `/` highlights.

A word matches when the BM25 analyzer (`ctxr.index.bm25.analyzer`) gives it a term the query
also has, after the same casefolding, stop words, stemming and identifier splitting the index
used: "migrations" in a chunk matches the query "migration", `handle_request` matches "handle
request", and "the" matches nothing. So what is marked is what the sparse ranking scored, not a
guess made by a second tokenizer in the browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxr.index.bm25.analyzer import Bm25Analyzer


@dataclass(frozen=True, slots=True)
class Matches:
    """The query's distinct terms in order, and per text its matched spans `[start, end)`."""

    terms: list[str]
    spans: list[list[tuple[int, int]]]


def matches(analyzer: Bm25Analyzer, query: str, texts: Sequence[str]) -> Matches:
    """The spans of each of `texts` whose BM25 terms the query shares (code-point offsets,
    ascending, adjacent or overlapping spans joined)."""
    terms = list(dict.fromkeys(analyzer.terms(query)))
    wanted = frozenset(terms)
    return Matches(terms, [_spans(analyzer, text, wanted) for text in texts])


def _spans(analyzer: Bm25Analyzer, text: str, wanted: frozenset[str]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    if not wanted:
        return found
    for start, end, terms in analyzer.term_spans(text):
        if not wanted.intersection(terms):
            continue
        if found and start <= found[-1][1]:  # CJK bigrams overlap: one mark, not two
            found[-1] = (found[-1][0], max(end, found[-1][1]))
        else:
            found.append((start, end))
    return found
