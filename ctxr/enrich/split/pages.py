"""Page numbers of chunks of a PDF's text: the form feeds of `PAGE_BREAK` counted before an offset.

The loader (`ctxr.enrich.load.pdf`) joins pages with `ctxr.types.PAGE_BREAK`; the splitter
maps every chunk's offsets back to the pages it touches, so no side table is needed."""

from __future__ import annotations

import bisect
from dataclasses import replace

from ctxr.types import Chunk


def page_starts(text: str) -> list[int]:
    """Offsets of the form feeds that separate pages (page ``i + 2`` starts after the i-th)."""
    return [i for i, ch in enumerate(text) if ch == "\f"]


def pages_of(breaks: list[int], start: int, end: int) -> tuple[int, ...]:
    """The 1-based pages that ``text[start:end]`` touches, given ``page_starts(text)``."""
    first = bisect.bisect_right(breaks, start) + 1
    last = bisect.bisect_left(breaks, end) + 1  # a span ending just before a break stays put
    return tuple(range(first, max(first, last) + 1))


def with_pages(text: str, chunks: list[Chunk]) -> list[Chunk]:
    """The chunks with ``pages`` set from their offsets (a chunk across a break lists both)."""
    breaks = page_starts(text)
    return [replace(chunk, pages=pages_of(breaks, chunk.start, chunk.end)) for chunk in chunks]
