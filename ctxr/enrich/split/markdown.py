"""Markdown splitting along headings, blocks and lines.

Structure recognised (a deliberate subset of CommonMark):

* ATX headings (``#`` to ``######`` followed by a space or the line end, at most three spaces
  of indent; closing ``#``s and a MkDocs/Pandoc attribute list such as ``{ #install }`` are
  dropped from the trail) and setext headings (a single paragraph line under
  ``===`` for level 1 or ``---`` for level 2; the line must not continue a paragraph nor be a
  list item or a quote, so a ``---`` rule after text in a list stays a rule).
* Fenced code blocks (``````` or ``~~~``, closed by the same character at least as long; an
  unclosed fence runs to the end) and YAML front matter: nothing inside is a heading, and no
  cut falls inside unless the block alone exceeds the budget (then it is cut between lines).
* Tables (a row with ``|`` followed by a delimiter row): cut only between rows; a chunk that
  starts inside a table repeats the header and delimiter rows in its ``prefix``.
* Lists introduced by a line ending in ``:`` (``Steps:``, then ``-``, ``*``, ``+`` or ``1.``
  items, blank lines between allowed): the introducing line stays with the first item.

Every heading starts a section that runs to the next heading. ``heading_path`` of a section is
the heading texts from the outermost ancestor down to its own heading.

Merging: consecutive sections are packed into one chunk while it fits the budget and every
section after the first is nested under the first (its level is deeper; the text before the
first heading counts as level 0, the root). The merged chunk's ``heading_path`` is the first
section's, which is therefore a true ancestor trail of everything in the chunk; a heading of
the same or a higher level starts a new chunk, unless every section packed so far is a bare
heading (a heading with no body of its own: "# Reference" over nothing). Then the next section
joins them whatever its level, and its trail becomes the chunk's: the bare headings travel as
text before the content they precede, so a file of empty headings packs up to the budget
instead of giving one chunk of four tokens per heading.

A section larger than the budget is split by blocks (blank lines outside fences; a heading
or a list's introducing line stays glued to the block after it), then lines (a fenced block
counts as one line), then plain lines, sentences and finally words. Its chunks after the
first carry ``prefix`` = its heading trail as Markdown heading lines ("# Guide\\n## Install"),
so that the indexed text keeps its headings; the prefix is never part of ``text``.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ctxr.enrich.headings import heading_text
from ctxr.enrich.split.recursive import Level, add_overlap, lines, sentences, split_span
from ctxr.enrich.split.sizing import Piece, Sized, Sizer, Span, trim

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_SETEXT_TEXT = re.compile(r"^(?: {4}|\t| {0,3}(?:>|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)))")
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_NEWLINE = re.compile(r"\n")
# A line ending in ":" followed (blank lines allowed) by a list item: group 1 is its newline.
_LIST_INTRO = re.compile(
    r":[ \t\r]*(\n)(?:[ \t\r]*\n)*[ ]{0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)", re.MULTILINE
)


@dataclass(frozen=True, slots=True)
class _Section:
    span: Span
    level: int  # 0 for the text before the first heading
    trail: tuple[tuple[int, str], ...]  # (level, text) of each heading down to this one
    body: bool  # text of its own below its heading (the text before any heading always has)


@dataclass(slots=True)
class _Structure:
    headings: list[tuple[int, int, str]]  # (start offset, level, text)
    heading_ends: set[int]  # offsets of the newline that ends each heading
    intro_ends: set[int]  # offsets of the newline after a line that introduces a list
    opaque: list[Span]  # fenced blocks and front matter, in order
    tables: list[tuple[int, int, int]]  # (start, end of delimiter row, end)


def _scan(text: str) -> _Structure:
    """One pass over the lines that finds headings, fences, front matter and tables."""
    rows = text.split("\n")
    if len(rows) > 1 and text.endswith("\n"):
        rows.pop()  # a final newline does not begin another line
    starts = list(itertools.accumulate((len(row) + 1 for row in rows), initial=0))
    ends = [start - 1 for start in starts[1:]]  # each line's newline (or the text end)
    starts.pop()
    ends[-1] = len(text)
    if "\r" in text:
        rows = [row.rstrip("\r") for row in rows]
    found = _Structure([], set(), set(), [], [])
    found.intro_ends.update(m.start(1) for m in _LIST_INTRO.finditer(text))
    # Each line's first non-blank character ("" for a blank line, which is "in" any str).
    firsts = [row.lstrip()[:1] for row in rows]
    firsts.append("")  # (past the last line)
    i, n = 0, len(rows)
    if n and rows[0].rstrip() == "---":  # YAML front matter
        close = next((j for j in range(1, n) if rows[j].rstrip() in ("---", "...")), None)
        if close is not None:
            found.opaque.append((0, ends[close]))
            i = close + 1
    after_paragraph = False
    while i < n:
        row = rows[i]
        # Most lines are plain text: settle them without the regular expressions below.
        # (A line starting with a fence, heading, setext or rule character, a blank line, a
        # line with a "|" or one above a "=" or "-" line takes the full path.)
        if firsts[i] not in "`~#=-" and "|" not in row and firsts[i + 1] not in ("=", "-"):
            i, after_paragraph = i + 1, True
            continue
        fence = _FENCE_OPEN.match(row)
        if fence:
            mark = fence.group(1)
            j = i + 1
            while j < n:
                closing = _FENCE_CLOSE.match(rows[j]) if firsts[j] == mark[0] else None
                if (
                    closing
                    and closing.group(1)[0] == mark[0]
                    and len(closing.group(1)) >= len(mark)
                ):
                    break
                j += 1
            j = min(j, n - 1)
            found.opaque.append((starts[i], ends[j]))
            i, after_paragraph = j + 1, False
            continue
        atx = _ATX.match(row)
        if atx:
            title = heading_text(_ATX_CLOSING.sub("", atx.group(2)))
            found.headings.append((starts[i], len(atx.group(1)), title))
            found.heading_ends.add(ends[i])
            i, after_paragraph = i + 1, False
            continue
        if not row.strip():
            i, after_paragraph = i + 1, False
            continue
        if i + 1 < n and not after_paragraph and not _NOT_SETEXT_TEXT.match(row):
            setext = _SETEXT.match(rows[i + 1])
            if setext:
                level = 1 if setext.group(1)[0] == "=" else 2
                found.headings.append((starts[i], level, heading_text(row)))
                found.heading_ends.add(ends[i + 1])
                i, after_paragraph = i + 2, False
                continue
        if "|" in row and i + 1 < n and "|" in rows[i + 1] and _TABLE_DELIMITER.match(rows[i + 1]):
            j = i + 2
            while j < n and "|" in rows[j] and rows[j].strip():
                j += 1
            found.tables.append((starts[i], ends[i + 1], ends[j - 1]))
            i, after_paragraph = j, False
            continue
        i, after_paragraph = i + 1, True
    return found


def _sections(text: str, found: _Structure) -> list[_Section]:
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    bounds = [(0, 0, ""), *found.headings]
    # Each heading's own end, in heading order (both were found in one pass, in order).
    line_ends = [0, *sorted(found.heading_ends)]
    for k, (start, level, title) in enumerate(bounds):
        if k > 0:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        end = bounds[k + 1][0] if k + 1 < len(bounds) else len(text)
        span = trim(text, start, end)
        if span is not None:
            body = k == 0 or trim(text, max(line_ends[k], span[0]), span[1]) is not None
            sections.append(_Section(span, level, tuple(stack), body))
    return sections


def _levels(found: _Structure) -> tuple[Level, ...]:
    """The ladder for an oversized section: blocks, Markdown lines, lines, sentences."""
    opaque = found.opaque
    opaque_starts = [s for s, _ in opaque]

    def inside(pos: int) -> bool:
        k = bisect.bisect_right(opaque_starts, pos) - 1
        return k >= 0 and pos < opaque[k][1]

    def cutting_at(pattern: re.Pattern[str], glued: set[int]) -> Level:
        def level(text: str, start: int, end: int) -> list[Span]:
            pieces: list[Span] = []
            pos = start
            for match in pattern.finditer(text, start, end):
                if inside(match.start()) or match.start() in glued:
                    continue
                span = trim(text, pos, match.start())
                if span is not None:
                    pieces.append(span)
                pos = match.end()
            span = trim(text, pos, end)
            if span is not None:
                pieces.append(span)
            return pieces

        return level

    # A heading's own newline is "glued": the heading stays with the block below it; so is
    # the newline after a line that introduces a list ("Steps:"), at every level.
    blocks = cutting_at(_BLANK_LINES, found.heading_ends | found.intro_ends)
    markdown_lines = cutting_at(_NEWLINE, found.intro_ends)
    return (blocks, markdown_lines, lines, sentences)


def _render(trail: tuple[tuple[int, str], ...]) -> str:
    return "\n".join(f"{'#' * level} {title}".rstrip() for level, title in trail)


def split_markdown(sizer: Sizer, max_tokens: int, overlap: int) -> list[Piece]:
    """Pieces of a Markdown text: merged small sections and split large ones, in order."""
    text = sizer.text
    found = _scan(text)
    levels = _levels(found)
    out: list[Piece] = []
    # Each packed section, its size, and whether it anchors the chunk (the run's first, or one
    # that joined bare headings): the chunk's trail is its last anchor's.
    run: list[tuple[_Section, Sized, bool]] = []

    def flush(run: list[tuple[_Section, Sized, bool]]) -> None:
        if not run:
            return
        first_size = run[0][1]
        size = first_size if len(run) == 1 else sizer.sized(first_size.start, run[-1][1].end)
        if size.tokens > max_tokens:  # the estimate was too kind: emit the last one apart
            flush(run[:-1])
            flush(run[-1:])
            return
        anchor = next(s for k, (s, _, a) in reversed(list(enumerate(run))) if a or k == 0)
        out.append(Piece(size, tuple(title for _, title in anchor.trail)))

    estimate = 0
    anchor_level = 0
    bare = False  # every section in the run is a bare heading
    for section in _sections(text, found):
        size = sizer.sized(*section.span)
        nested = bool(run) and section.level > anchor_level
        after_bare = bool(run) and not nested and bare
        if nested or after_bare:
            cost = sizer.gap_cost(run[-1][1].end, size.start) + size.tokens
            if estimate + cost <= max_tokens:
                run.append((section, size, after_bare))
                estimate += cost
                bare = bare and not section.body
                if after_bare:
                    anchor_level = section.level
                continue
        flush(run)
        run, estimate, anchor_level, bare = [], 0, section.level, not section.body
        if size.tokens <= max_tokens:
            run, estimate = [(section, size, True)], size.tokens
        else:
            out.extend(_split_section(sizer, section, size, levels, found, max_tokens, overlap))
    flush(run)
    return out


def _split_section(
    sizer: Sizer,
    section: _Section,
    size: Sized,
    levels: Sequence[Level],
    found: _Structure,
    max_tokens: int,
    overlap: int,
) -> list[Piece]:
    chunks = split_span(sizer, size, levels, max_tokens - overlap)
    chunks = add_overlap(sizer, chunks, overlap, max_tokens)
    path = tuple(title for _, title in section.trail)
    trail = _render(section.trail)
    pieces = [Piece(chunks[0], path)]
    for chunk in chunks[1:]:
        prefix = trail
        header = _table_header(sizer.text, found, chunk.start)
        if header:
            prefix = f"{prefix}\n\n{header}" if prefix else header
        pieces.append(Piece(chunk, path, prefix))
    return pieces


def _table_header(text: str, found: _Structure, pos: int) -> str:
    """The header and delimiter rows of the table ``pos`` lies in, below its header."""
    for start, header_end, end in found.tables:
        if header_end < pos <= end:
            return text[start:header_end].replace("\r\n", "\n")
    return ""
