"""Expanding hits to their parent sections (`search(..., expand=True)`).

An index built with parent-child chunking (`CTXR_CHUNKING=parent`) stores each small chunk's
enclosing section as `parent_start` / `parent_end`. Expansion replaces such a hit by its parent
section: the text is rebuilt from the document's stored chunks, since `doc.text[start:end] ==
chunk.text` for every chunk and the children of a parent cover every non-whitespace character
of it. Chunks are laid end to end in offset order, each adding what lies past the text so far,
and the whitespace between two chunks comes from the `space_after` stored with the first of
them (as for merged passages, `ctxr.retrieve.passages`), so the text is exactly
`doc.text[parent_start:parent_end]`. When that cannot be done exactly (a chunk missing, a gap
longer than the stored whitespace, an index without `space_after`), the hit is kept as it was
and flagged.

Several hits of one parent collapse into one: it takes the best hit's rank, score, chunk id and
context, the heading path of the parent's first chunk, the pages of its chunks, and for each
retriever the best rank (with its score) any of the parent's hits had; it is marked `expanded`.
Hits without a parent span pass unchanged but flagged (`EXPAND_UNAVAILABLE`): their document
was not indexed with parent chunking, and a caller must be able to tell.
Results come back in their best hit's order, ranks renumbered from 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxr.retrieve.passages import best_scores
from ctxr.types import Hit

EXPAND_FAILED = "expand failed: parent section could not be rebuilt exactly"
# A hit of a document indexed without parent sections (the index, or that document, was not
# built with parent chunking): it comes back as it was, and says why.
EXPAND_UNAVAILABLE = (
    "not expanded: its document was not indexed with --chunking parent; re-index with "
    "`ctxr index PATH --chunking parent` (CTXR_CHUNKING=parent) to get parent sections"
)

ParentSpan = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Expanded:
    """Expanded hits, plus the whitespace after each expanded hit's new end (for merging)."""

    hits: list[Hit]
    spaces: dict[str, str]


def expand_parents(
    hits: Sequence[Hit],
    parents: Mapping[str, ParentSpan],
    document_points: Callable[[str], Sequence[Mapping[str, Any]]],
) -> Expanded:
    """Hits in best-first order in, hits with parent sections in best-first order out.

    `parents` maps a chunk id to its parent span; `document_points(doc_id)` gives a document's
    chunk payloads (`start`, `end`, `text`, `space_after`, `heading_path`)."""
    payloads: dict[str, Sequence[Mapping[str, Any]]] = {}
    groups: dict[tuple[str, int, int], list[Hit]] = {}
    order: list[tuple[str, int, int] | Hit] = []
    for hit in sorted(hits, key=lambda h: h.rank):
        span = parents.get(hit.chunk_id)
        if span is None:
            order.append(replace(hit, flags=(*hit.flags, EXPAND_UNAVAILABLE)))
            continue
        key = (hit.doc_id, *span)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(hit)
    out: list[Hit] = []
    spaces: dict[str, str] = {}
    for item in order:
        if isinstance(item, Hit):
            out.append(item)
            continue
        doc_id, start, end = item
        if doc_id not in payloads:
            payloads[doc_id] = document_points(doc_id)
        group = groups[item]
        rebuilt = rebuild(payloads[doc_id], start, end)
        if rebuilt is None:
            out.extend(replace(h, flags=(*h.flags, EXPAND_FAILED)) for h in group)
            continue
        text, heading_path, space = rebuilt
        best = group[0]
        out.append(
            replace(
                best,
                start=start,
                end=end,
                text=text,
                heading_path=heading_path,
                scores=best_scores(group),
                pages=_pages(payloads[doc_id], start, end),
                expanded=True,
            )
        )
        spaces[best.chunk_id] = space
    return Expanded([replace(hit, rank=rank) for rank, hit in enumerate(out, start=1)], spaces)


def rebuild(
    points: Sequence[Mapping[str, Any]], start: int, end: int
) -> tuple[str, tuple[str, ...], str] | None:
    """(text of [start, end), the first chunk's heading path, the whitespace after `end`)
    rebuilt from chunk payloads, or None when it cannot be rebuilt exactly."""
    inside = sorted(
        (p for p in points if start <= int(p["start"]) and int(p["end"]) <= end),
        key=lambda p: (int(p["start"]), int(p["end"])),
    )
    if not inside or int(inside[0]["start"]) != start:
        return None
    first = inside[0]
    parts = [str(first["text"])]
    pos, space = int(first["end"]), str(first.get("space_after") or "")
    for p in inside[1:]:
        p_start, p_end, p_text = int(p["start"]), int(p["end"]), str(p["text"])
        if p_end <= pos:
            continue
        if p_start > pos:
            if p_start - pos > len(space):
                return None  # a gap the stored whitespace does not bridge
            parts.append(space[: p_start - pos] + p_text)
        else:
            parts.append(p_text[pos - p_start :])
        pos, space = p_end, str(p.get("space_after") or "")
    text = "".join(parts)
    if pos != end or len(text) != end - start:
        return None
    return text, tuple(first.get("heading_path") or ()), space


def _pages(points: Sequence[Mapping[str, Any]], start: int, end: int) -> tuple[int, ...]:
    """The PDF pages of the chunks inside [start, end): the parent section's pages."""
    inside = (p for p in points if start <= int(p["start"]) and int(p["end"]) <= end)
    return tuple(sorted({int(n) for p in inside for n in p.get("pages") or ()}))
