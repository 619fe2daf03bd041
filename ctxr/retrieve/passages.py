"""Merging adjacent hits from one document into one passage (`search(..., merge=True)`).

Hits of one document whose spans overlap, touch, or are separated only by the whitespace the
splitter left between two chunks become one passage covering the union of their spans. Its
text is rebuilt from the chunks alone, since `doc.text[start:end] == chunk.text` for every
chunk: each later chunk adds what lies past the passage's end so far, and a whitespace gap is
filled from the `space_after` the writer stores with each chunk (the whitespace that follows it
in the document), so the passage's text is still exactly `doc.text[start:end]`. Chunks of an
index written before `space_after` existed merge only when they overlap or touch.

The passage takes the rank, score, chunk id and context of its best hit, the heading path of
its first chunk, the pages and flags of all of them, and for each retriever the best rank
(with its score) any of its chunks had.
Passages come back in their best hit's order, ranks renumbered from 1; so k hits can give
fewer passages.

Expansion of a hit to its parent section (parent-child chunks) is `ctxr.retrieve.expand`; when
both are asked for, hits are expanded first and the sections then merged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ctxr.types import Hit, RetrieverScore


def merge_adjacent(hits: Sequence[Hit], spaces: Mapping[str, str] | None = None) -> list[Hit]:
    """Hits in best-first order in, passages in best-first order out (see the module doc).

    `spaces` maps a chunk id to the whitespace that follows the chunk in its document."""
    spaces = spaces or {}
    by_doc: dict[str, list[Hit]] = {}
    for hit in hits:
        by_doc.setdefault(hit.doc_id, []).append(hit)
    passages: list[tuple[int, Hit]] = []
    for doc_hits in by_doc.values():
        group: list[Hit] = []
        end, space = 0, ""
        for hit in sorted(doc_hits, key=lambda h: (h.start, h.end)):
            if group and hit.start > end + len(space):
                passages.append(_merge(group, spaces))
                group = []
            if not group or hit.end > end:
                end, space = hit.end, spaces.get(hit.chunk_id, "")
            group.append(hit)
        passages.append(_merge(group, spaces))
    passages.sort(key=lambda item: item[0])
    return [replace(hit, rank=rank) for rank, (_, hit) in enumerate(passages, start=1)]


def _merge(group: list[Hit], spaces: Mapping[str, str]) -> tuple[int, Hit]:
    """(the best hit's rank, the passage) for adjacent hits sorted by start."""
    best = min(group, key=lambda h: h.rank)
    if len(group) == 1:
        return best.rank, best
    first = group[0]
    text, end, space = first.text, first.end, spaces.get(first.chunk_id, "")
    for hit in group[1:]:
        if hit.end <= end:
            continue  # inside what the passage already covers
        if hit.start >= end:
            text += space[: hit.start - end] + hit.text
        else:
            text += hit.text[end - hit.start :]
        end, space = hit.end, spaces.get(hit.chunk_id, "")
    scores = best_scores(group)
    pages = tuple(sorted({n for hit in group for n in hit.pages}))
    flags = tuple(dict.fromkeys(f for hit in group for f in hit.flags))
    passage = replace(
        best, start=first.start, end=end, heading_path=first.heading_path, text=text,
        scores=scores, pages=pages, flags=flags, expanded=any(h.expanded for h in group),
    )  # fmt: skip
    return best.rank, passage


def best_scores(group: Sequence[Hit]) -> dict[str, RetrieverScore]:
    """Each retriever's best (lowest-rank) score among hits joined into one passage."""
    scores: dict[str, RetrieverScore] = {}
    for hit in group:
        for name, score in hit.scores.items():
            held = scores.get(name)
            if held is None or score.rank < held.rank:
                scores[name] = score
    return scores
