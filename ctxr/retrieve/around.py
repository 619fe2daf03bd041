"""The exact text around a span of an indexed document, rebuilt from its chunks.

An agent that found a hit often needs a little more than the chunk: the sentences before and
after it. The index holds every chunk's text, offsets and the whitespace that follows it
(`space_after`), so the text of any run of consecutive chunks is rebuilt exactly
(`ctxr.retrieve.expand.rebuild`, `doc.text[start:end]` and nothing else) without reading the
source file, which may have moved or changed since it was indexed. The window is then cut to
`window` characters either side of the span asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxr.retrieve.expand import rebuild


def passage_around(
    points: Sequence[Mapping[str, Any]], start: int, end: int, window: int
) -> dict[str, Any] | None:
    """Text of `[start - window, end + window)` clipped to what the chunks cover, with its
    offsets, source and the heading trail of the chunk the span begins in; None when no chunk
    overlaps the span or the chunks around it cannot be joined exactly (no `space_after`)."""
    lo, hi = max(0, start - window), end + window
    near = sorted(
        (p for p in points if int(p["start"]) < hi and int(p["end"]) > lo),
        key=lambda p: (int(p["start"]), int(p["end"])),
    )
    if not near or not any(int(p["start"]) < end and int(p["end"]) > start for p in near):
        return None
    # The covered run: from the first nearby chunk to the furthest end, contiguous.
    first, last = int(near[0]["start"]), max(int(p["end"]) for p in near)
    rebuilt = rebuild(near, first, last)
    if rebuilt is None:
        return None
    text = rebuilt[0]
    cut_start, cut_end = max(first, lo), min(last, hi)
    hit = next(p for p in near if int(p["end"]) > start)  # the chunk the span begins in
    return {
        "source": str(hit.get("source") or ""),
        "start": cut_start,
        "end": cut_end,
        "text": text[cut_start - first : cut_end - first],
        "heading_path": list(hit.get("heading_path") or ()),
    }
