"""How a query's hits become the ranks of the ids a data set judges.

- anthropic-codebase, ``chunks="given"``: each document is indexed with the set's own chunks,
  so a hit's chunk id maps back to its ``uuid#index`` key: Anthropic's Pass@k, comparable.
- anthropic-codebase, ``chunks="ours"``: whole documents go through ctxr's splitter. A golden
  chunk counts as found at the rank of the first hit from the same document whose span
  overlaps it by at least half of the shorter of the two spans (``spans_match``): a hit
  that holds most of a golden chunk, or a small hit that lies mostly inside one, finds it; a
  hit that merely touches its edge does not. One hit may find several golden chunks; each
  golden chunk counts once (``span_ranks``). ``ctxr trial`` judges its questions' answers,
  spans of the user's documents, by the same rule.
- BEIR: a document is indexed as title + blank line + text (Anserini's "flat" fields); the
  hits become a ranking of distinct documents, each at its best chunk (``document_ranks``).
  BEIR scores a run of document -> score, one entry per document, so a second chunk of a
  document takes no place in the ranking (docs/explanation/evaluation.md has the measured effect).
  A query's ignored documents (its own, when the corpus holds it: ArguAna) take no place
  either, as BEIR's ``ignore_identical_ids`` drops them from the run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from ctxr.eval import metrics
from ctxr.eval.datasets import EvalDataset
from ctxr.eval.rows import ChunkSource, DatasetKind
from ctxr.types import Hit


def spans_match(gold_start: int, gold_end: int, hit_start: int, hit_end: int) -> bool:
    """The ``chunks="ours"`` rule: overlap >= half of the shorter span (and > 0 characters)."""
    overlap = min(gold_end, hit_end) - max(gold_start, hit_start)
    shorter = min(gold_end - gold_start, hit_end - hit_start)
    return overlap > 0 and 2 * overlap >= shorter


#: A judged span: (judged id, document id, start, end), character offsets in the document.
JudgedSpan = tuple[str, str, int, int]


def span_ranks(wanted: Iterable[JudgedSpan], hits: Sequence[Hit]) -> dict[str, int]:
    """Each judged span found by `hits` (same document, ``spans_match``) with the rank of the
    first hit that finds it. The rule of ``chunks="ours"``, and of ``ctxr trial``, whose
    answers are spans of the user's documents."""
    spans = list(wanted)
    found: dict[str, int] = {}
    for hit in hits:
        for key, doc_id, start, end in spans:
            if doc_id == hit.doc_id and spans_match(start, end, hit.start, hit.end):
                found.setdefault(key, hit.rank)
    return found


def document_ranks(hits: Sequence[Hit], ignore: Collection[str] = ()) -> dict[str, int]:
    """Each document's rank among the distinct documents of `hits`, in best-chunk order,
    leaving out the documents of `ignore` (the ranks below them move up)."""
    ordered = dict.fromkeys(h.doc_id for h in hits if h.doc_id not in ignore)
    return metrics.first_ranks(list(ordered))


def judged_ranks(
    dataset: EvalDataset, kind: DatasetKind, chunks: ChunkSource, keys: dict[str, str]
) -> Callable[[str, list[Hit]], dict[str, int]]:
    """A function from one query's hits to judged id -> first rank found."""
    spans = {c.chunk_key: (c.doc_id, c.start, c.end) for d in dataset.documents for c in d.chunks}
    qrels = dataset.qrels()
    ignored = {q.query_id: q.ignore for q in dataset.queries}

    def given(query_id: str, hits: list[Hit]) -> dict[str, int]:
        return metrics.first_ranks([keys.get(h.chunk_id, h.chunk_id) for h in hits])

    def ours(query_id: str, hits: list[Hit]) -> dict[str, int]:
        return span_ranks(((key, *spans[key]) for key in qrels[query_id]), hits)

    def beir(query_id: str, hits: list[Hit]) -> dict[str, int]:
        return document_ranks(hits, ignored.get(query_id, ()))

    if kind == "beir":
        return beir
    return given if chunks == "given" else ours
