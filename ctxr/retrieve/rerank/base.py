"""Rerankers behind one protocol, and the choice between them.

A reranker reads the query and the top fused candidates, each as the index saw it (the chunk's
context, then its text), and puts them in a new order. It never fails a search: an error, a
timeout or an answer it cannot read returns the fused order unchanged, every hit flagged with
what went wrong, so a user sees both the results and why they were not reranked.

Three kinds, each in its own module and imported only when made:

- ``llm``: the configured provider (Anthropic, OpenAI or any OpenAI-compatible server) scores
  every candidate in one prompt (`ctxr.retrieve.rerank.llm`);
- ``http``: a Cohere-compatible ``/rerank`` endpoint (Cohere, Jina, Voyage, TEI) at
  ``CTXR_RERANK_URL`` (`ctxr.retrieve.rerank.http`);
- ``cross-encoder``: an ONNX cross-encoder from a local directory, ``CTXR_RERANK_MODEL_PATH``
  (`ctxr.retrieve.rerank.cross_encoder`).

Implementations are sync, like the search service and the embedders: the API runs a search
in a worker thread, and a sync client needs no event loop of its own there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from ctxr.errors import RerankError
from ctxr.types import Hit, RetrieverScore

# Passages longer than this are cut before they are sent: a reranker reads the beginning of a
# chunk, and fifty whole chunks could exceed a small model's window.
MAX_PASSAGE_CHARS: Final = 2000


@dataclass(frozen=True, slots=True)
class RerankResult:
    """The hits to return (at most `top_n`), and why they are in fused order, if they are."""

    hits: list[Hit]
    flagged: str | None = None


class Reranker(Protocol):
    """Implementations: `LLMReranker`, `HTTPReranker`, `CrossEncoderReranker` (and test fakes)."""

    @property
    def name(self) -> str: ...

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> RerankResult: ...

    def close(self) -> None: ...


def passage(hit: Hit) -> str:
    """What a reranker reads of a hit: its context, then its text (as the index embedded it)."""
    text = f"{hit.context}\n\n{hit.text}" if hit.context else hit.text
    return text if len(text) <= MAX_PASSAGE_CHARS else text[:MAX_PASSAGE_CHARS] + "…"


def reorder(hits: Sequence[Hit], scores: Sequence[float], top_n: int) -> list[Hit]:
    """`hits` sorted by `scores` (descending; ties keep the fused order), the first `top_n`,
    renumbered, each with its reranker score as `score` and in `scores["rerank"]`, and the
    fused score and rank it replaces kept in `scores["fused"]`."""
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))[:top_n]
    return [
        dataclasses.replace(
            hits[i],
            rank=rank,
            score=float(scores[i]),
            scores={
                **hits[i].scores,
                "fused": RetrieverScore(hits[i].score, hits[i].rank),
                "rerank": RetrieverScore(float(scores[i]), rank),
            },
        )
        for rank, i in enumerate(order, start=1)
    ]


def fallback(hits: Sequence[Hit], top_n: int, flag: str) -> RerankResult:
    """The fused order, cut to `top_n`, every hit carrying `flag`."""
    flagged = [dataclasses.replace(h, flags=(*h.flags, flag)) for h in hits[:top_n]]
    return RerankResult(flagged, flag)


def rerank_with(
    score: Callable[[str, list[str]], Sequence[float]],
    query: str,
    hits: list[Hit],
    top_n: int,
) -> RerankResult:
    """Run `score(query, passages)` (one score per passage) and reorder by it; any failure of
    the scorer returns the fused order, flagged."""
    if not hits:
        return RerankResult([])
    try:
        scores = score(query, [passage(h) for h in hits])
        if len(scores) != len(hits):
            raise RerankError(f"rerank: {len(scores)} scores for {len(hits)} passages")
    except RerankError as exc:
        return fallback(hits, top_n, exc.flag)
    except TimeoutError:
        return fallback(hits, top_n, "rerank failed: timeout")
    except Exception as exc:  # a reranker must never fail the search itself
        return fallback(hits, top_n, f"rerank failed: {type(exc).__name__}: {exc}"[:300])
    return RerankResult(reorder(hits, scores, top_n))
