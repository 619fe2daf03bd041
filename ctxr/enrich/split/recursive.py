"""Recursive splitting of prose and code by a ladder of separators.

A span that fits the budget is one chunk. One that does not is cut at the coarsest separator
that occurs in it (for prose: blank lines, then line breaks, then sentence ends; for code:
blank lines before an unindented line, i.e. between top-level definitions, then any blank
line, then line breaks). The pieces that fit are packed greedily into chunks; a piece that
does not fit is split by the next separator on its own, so a boundary of a coarser kind is
never given up for a finer one. When no separator is left, the span is cut every ``budget``
tokens at the last word boundary (and only a run without whitespace is cut mid-word, at a
token boundary).

Sentence ends are ``.``, ``!``, ``?`` or ``…`` (plus closing quotes and brackets) followed by
whitespace and then something that is not a lower-case letter, or the CJK full stops, which
need no space. A period after a known abbreviation ("e.g.", "Dr.", "U.S.", single initials)
ends no sentence, and a decimal point ("3.14") is never followed by whitespace.

Overlap: after packing with ``budget - overlap`` tokens, each chunk but the first is extended
backwards into the previous one by about ``overlap`` tokens, starting at a sentence start
when one is near enough, otherwise at a word start, never mid-word; the extended chunk is
counted exactly and stays within the full budget.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

from ctxr.enrich.split.sizing import (
    Sized,
    Sizer,
    Span,
    char_len,
    pack,
    trim,
    window_split,
    word_start,
)

# A level takes the text and a trimmed span and returns the trimmed, non-empty pieces of the
# span in order; together they hold every non-whitespace character of the span.
Level = Callable[[str, int, int], list[Span]]

ABBREVIATIONS = frozenset(
    (
        *("mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "vs", "etc", "cf", "al", "ph.d"),
        *("approx", "fig", "figs", "no", "nos", "vol", "vols", "ed", "eds", "inc", "ltd", "co"),
        *("corp", "dept", "est", "gen", "gov", "lt", "col", "sgt", "capt", "rev", "hon", "pp"),
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
        *("ave", "blvd", "rd", "mt", "ft", "ch", "sec", "eq", "ref", "resp", "viz"),
    )
)
# Dotted abbreviations such as "e.g.", "i.e.", "U.S.", "a.m.", "Ph.D." and initials ("J.").
_DOTTED = re.compile(r"^(?:[^\W\d_]\.)+$")
# CJK full stops (U+3002, U+FF01, U+FF1F) end a sentence without a following space.
_CJK_ENDS = "\u3002\uff01\uff1f"
_QUOTES_CLOSE = "\u201d\u2019"  # right double and single quotation marks
_SENTENCE_END = re.compile(
    rf"[.!?\u2026]+[\"'{_QUOTES_CLOSE})\]]*(?=\s)"
    rf"|[{_CJK_ENDS}]+[\u300d\u300f{_QUOTES_CLOSE})\uff09]*"
)
_OPENERS = "\"'([{\u201c\u2018"


def split_on(pattern: re.Pattern[str]) -> Level:
    """A level that cuts wherever ``pattern`` matches (the match itself is whitespace)."""

    def level(text: str, start: int, end: int) -> list[Span]:
        pieces: list[Span] = []
        pos = start
        for match in pattern.finditer(text, start, end):
            span = trim(text, pos, match.start())
            if span is not None:
                pieces.append(span)
            pos = match.end()
        span = trim(text, pos, end)
        if span is not None:
            pieces.append(span)
        return pieces

    return level


def _is_sentence_end(text: str, match: re.Match[str], end: int) -> bool:
    if match.group()[0] in _CJK_ENDS:
        return True
    nxt = word_start(text, match.end(), end)
    if nxt is None:
        return False  # only whitespace follows: the span ends here anyway
    # "approx. five", "... and then": a lower-case start means the sentence goes on.
    if text[nxt].islower():
        return False
    if match.group()[0] != ".":
        return True
    word_from = match.start()
    while word_from > 0 and not text[word_from - 1].isspace():
        word_from -= 1
    word = text[word_from : match.start() + 1].lstrip(_OPENERS)
    stem = word.rstrip(".").lower()
    return stem not in ABBREVIATIONS and not _DOTTED.match(word)


def sentences(text: str, start: int, end: int) -> list[Span]:
    """Sentence level: cut after sentence-ending punctuation (see the module docstring)."""
    pieces: list[Span] = []
    pos = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if match.end() <= pos or not _is_sentence_end(text, match, end):
            continue
        span = trim(text, pos, match.end())
        if span is not None:
            pieces.append(span)
        pos = match.end()
    span = trim(text, pos, end)
    if span is not None:
        pieces.append(span)
    return pieces


paragraphs = split_on(re.compile(r"\n[ \t\r\f\v]*\n\s*"))
lines = split_on(re.compile(r"\n"))
# A blank line followed by an unindented line: the usual seam between top-level definitions.
top_level_blocks = split_on(re.compile(r"\n(?:[ \t\r\f\v]*\n)+(?=\S)"))

# A chunk of at most 1/_SCRAP of the budget next to an oversized piece is a scrap, see below.
_SCRAP = 4

PROSE_LEVELS: tuple[Level, ...] = (paragraphs, lines, sentences)
CODE_LEVELS: tuple[Level, ...] = (top_level_blocks, paragraphs, lines)


def split_span(
    sizer: Sizer,
    span: Sized,
    levels: Sequence[Level],
    budget: int,
    lead: Sized | None = None,
) -> list[Sized]:
    """Chunks of at most ``budget`` tokens covering a trimmed, counted span.

    ``lead`` is a short chunk just before the span that may share the span's first chunk.
    """
    if span.tokens <= budget:
        return pack(sizer, [lead, span] if lead else [span], budget)
    text = sizer.text
    depth = 0
    while True:
        if depth == len(levels):
            return window_split(sizer, lead.start if lead else span.start, span.end, budget)
        pieces = levels[depth](text, span.start, span.end)
        depth += 1
        if len(pieces) > 1:
            break
    finer = levels[depth:]
    out: list[Sized] = []
    group: list[Sized] = [lead] if lead else []
    for start, end in pieces:
        piece = sizer.sized(start, end)
        if piece.tokens <= budget:
            group.append(piece)
            continue
        # An oversized piece is split on its own, so that its neighbours keep their coarser
        # seams; but a short chunk on either side of it (a heading, a lead-in line, the tail
        # of the split) joins it rather than standing alone as a scrap.
        packed = pack(sizer, group, budget)
        carried = packed.pop() if packed and packed[-1].tokens <= budget // _SCRAP else None
        out.extend(packed)
        out.extend(split_span(sizer, piece, finer, budget, carried))
        group = [out.pop()] if out[-1].tokens <= budget // _SCRAP else []
    out.extend(pack(sizer, group, budget))
    return out


def add_overlap(sizer: Sizer, chunks: Sequence[Sized], overlap: int, budget: int) -> list[Sized]:
    """Start each chunk but the first about ``overlap`` tokens inside the previous one."""
    if overlap <= 0:
        return list(chunks)
    out = [chunks[0]] if chunks else []
    for prev, cur in itertools.pairwise(chunks):
        room = min(overlap, budget - cur.tokens)
        extended = None
        if room > 0:
            extended = _extend_back(sizer, prev, cur, room, budget)
        out.append(extended or cur)
    return out


def _extend_back(sizer: Sizer, prev: Sized, cur: Sized, room: int, budget: int) -> Sized | None:
    text = sizer.text
    earliest = sizer.start_of_last(cur.start, room)
    if earliest is None:
        earliest = _start_of_last(sizer, prev, cur, room)
        if earliest is None:
            return None
    earliest = min(max(earliest, prev.start + 1), cur.start)
    candidates: list[int] = []
    starts = [s for s, _ in sentences(text, earliest, cur.start)[1:]]
    # A sentence start is the nicer seam, but not at the price of most of the overlap.
    if starts and sizer.count(starts[0], cur.start) * 2 >= room:
        candidates.append(starts[0])
    word = word_start(text, earliest, cur.start)
    while word is not None:
        candidates.append(word)
        word = word_start(text, word + 1, cur.start) if len(candidates) < 8 else None
    for begin in candidates:
        if not prev.start < begin < cur.start:
            continue
        count = sizer.count(begin, cur.end)
        if count <= budget:
            return Sized(begin, cur.end, count)
    return None


def _start_of_last(sizer: Sizer, prev: Sized, cur: Sized, room: int) -> int | None:
    """Where the last ``room`` tokens between ``prev.start`` and ``cur.start`` begin, without
    a token index: encode a window that holds them (widened until it does) rather than the
    whole previous chunk, starting at a word so that its tokens are the ones the text has."""
    text = sizer.text
    width = room * 8 + 16
    while True:
        lo = max(prev.start, cur.start - width)
        if lo > prev.start:
            lo = word_start(text, lo, cur.start) or prev.start
        tokens = sizer.encode(lo, cur.start)
        if len(tokens) > room or lo == prev.start:
            break
        width *= 2
    if lo == prev.start and len(tokens) <= 1:
        return None
    skip = len(tokens) - room if lo > prev.start else max(1, len(tokens) - room)
    return lo + char_len(sizer.encoding.decode_bytes(tokens[:skip]))
