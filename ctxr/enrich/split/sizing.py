"""Token arithmetic shared by the splitters: counting, packing, hard cuts and overlap.

Everything here works on character offsets into one document text, never on copies that
would need to be mapped back, so ``text[start:end]`` of every span is exactly what a chunk
holds. Spans are always trimmed: they start and end on a non-whitespace character.

Counting is the expensive part. Counting every candidate concatenation would be quadratic, so
pieces are counted once and their counts summed (plus what the whitespace between them costs);
tiktoken counts are nearly additive at whitespace boundaries, and every packed chunk is counted
exactly once more to make sure the estimate did not let it slip over budget. Counts of long
spans come from a ``TokenIndex``: the document is encoded once and each count costs two
lookups and at most a word of encoding at either end, so the repeated counting is nearly free.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import tiktoken

from ctxr.enrich.split.token_index import (
    INDEX_MIN_CHARS,
    INDEXED_MIN_CHARS,
    TRUSTED_ENCODINGS,
    TokenIndex,
)
from ctxr.tokens import get_encoding

# Any single code point is at most 4 UTF-8 bytes and every byte is a token of its own in the
# BPE vocabularies tiktoken ships, so a budget of 4 can always make progress one character at
# a time. Below that, "nothing exceeds max_tokens" could not be kept.
MIN_MAX_TOKENS = 4

Span = tuple[int, int]

_WORD_START = re.compile(r"(?<=\s)\S")
# Continuation bytes of UTF-8 (10xxxxxx); deleting them leaves one byte per character.
_CONTINUATION = bytes(range(0x80, 0xC0))


class Sized(NamedTuple):
    """A trimmed span of the document and the exact token count of its text."""

    start: int
    end: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Piece:
    """A chunk-to-be: a counted span plus what the Chunk carries besides its text."""

    span: Sized
    heading_path: tuple[str, ...]
    prefix: str = ""


class Sizer:
    """Counts tokens of spans of one text with one encoding; caches what whitespace costs."""

    def __init__(self, text: str, encoding: str) -> None:
        self.text = text
        self.encoding: tiktoken.Encoding = get_encoding(encoding)
        self._gap_cache: dict[str, int] = {}
        self._index: TokenIndex | None = None
        self._use_index = self.encoding.name in TRUSTED_ENCODINGS and len(text) >= INDEX_MIN_CHARS

    def count(self, start: int, end: int) -> int:
        """The exact number of tokens of ``text[start:end]`` encoded on its own."""
        if end - start < INDEXED_MIN_CHARS or not self._use_index:
            return self.direct_count(start, end)
        if self._index is None:
            # Built on the first count, whatever the span: every character is counted at
            # least once anyway, and once is what the index costs.
            try:
                self._index = TokenIndex(self.text, self.encoding)
            except UnicodeEncodeError:  # lone surrogates: only the direct path repairs them
                self._use_index = False
                return self.direct_count(start, end)
        return self._index.count(start, end, self.direct_count)

    def start_of_last(self, pos: int, tokens: int) -> int | None:
        """Where the last ``tokens`` tokens before ``pos`` begin, as the whole document's
        encoding has them; None when there is no token index (a short or untrusted text)."""
        return None if self._index is None else self._index.start_of_last(pos, tokens)

    def direct_count(self, start: int, end: int) -> int:
        return len(self.encode(start, end))

    def encode(self, start: int, end: int) -> list[int]:
        # Ordinary encoding: "<|endoftext|>" in a document is text, not an error or a special.
        return self.encoding.encode_ordinary(self.text[start:end])

    def sized(self, start: int, end: int) -> Sized:
        return Sized(start, end, self.count(start, end))

    def gap_cost(self, start: int, end: int) -> int:
        """What the whitespace between two pieces adds when they are joined.

        Spaces and tabs merge into the following word's token (" word" is one token), so they
        cost nothing; line breaks are tokens of their own.
        """
        gap = self.text[start:end]
        if "\n" not in gap and "\r" not in gap:
            return 0
        cost = self._gap_cache.get(gap)
        if cost is None:
            cost = len(self.encoding.encode(gap, disallowed_special=()))
            if len(self._gap_cache) < 4096:
                self._gap_cache[gap] = cost
        return cost


def char_byte_offsets(text: str) -> npt.NDArray[np.int64] | None:
    """UTF-8 byte offset at which each character starts (plus the end); None for ASCII."""
    if text.isascii():
        return None
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    widths = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    offsets = np.zeros(len(points) + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    return offsets


def trim(text: str, start: int, end: int) -> Span | None:
    """The span without surrounding whitespace, or None if nothing but whitespace is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def pack(sizer: Sizer, pieces: Sequence[Sized], budget: int) -> list[Sized]:
    """Greedily join consecutive pieces (each within budget) into chunks within budget.

    The join is estimated from the pieces' counts; the chosen chunk is then counted exactly
    and, if the estimate was too kind, packed again with a budget lowered by the overshoot.
    """
    out: list[Sized] = []
    i, n = 0, len(pieces)
    while i < n:
        first = pieces[i]
        limit = budget
        while True:
            j, estimate = i + 1, first.tokens
            while j < n:
                cost = sizer.gap_cost(pieces[j - 1].end, pieces[j].start) + pieces[j].tokens
                if estimate + cost > limit:
                    break
                estimate += cost
                j += 1
            if j == i + 1:
                out.append(first)
                break
            exact = sizer.count(first.start, pieces[j - 1].end)
            if exact <= budget:
                out.append(Sized(first.start, pieces[j - 1].end, exact))
                break
            limit = estimate - (exact - budget)  # strictly lower: the loop always ends
        i = j
    return out


def window_split(sizer: Sizer, start: int, end: int, budget: int) -> list[Sized]:
    """Cut a span that has no structural boundary left into chunks of at most ``budget`` tokens.

    Each cut is placed ``budget`` tokens on, then moved back to the last whitespace before it
    (a word boundary). Only a run without whitespace longer than the budget (a URL, a base64
    blob, unspaced CJK) is cut at a token boundary, mapped back to a character offset. A token
    that begins mid-character (emoji, CJK) makes the mapped piece count a little differently,
    so every piece is counted exactly and shrunk until it fits.
    """
    text = sizer.text
    out: list[Sized] = []
    pos = start
    width = budget * 6 + 16  # a first guess at how many characters hold ``budget`` tokens
    while pos < end:
        piece = _next_piece(sizer, pos, end, budget, width)
        out.append(piece)
        # The next window is sized from this piece, so it is rarely much wider than needed.
        width = (piece.end - pos) * 5 // 4 + 16
        nxt = trim(text, piece.end, end)
        if nxt is None:
            break
        pos = nxt[0]
    return out


def _next_piece(sizer: Sizer, pos: int, end: int, budget: int, width: int) -> Sized:
    text = sizer.text
    # Encode a window of about the piece's width rather than the whole rest of the span:
    # the cost per piece stays proportional to the piece, so the whole split stays linear.
    while True:
        stop = min(end, pos + width)
        tokens = sizer.encode(pos, stop)
        if len(tokens) > budget or stop == end:
            break
        width *= 2
    if len(tokens) <= budget:
        span = trim(text, pos, end)
        assert span is not None  # pos is on a non-whitespace character
        return Sized(span[0], span[1], len(tokens))
    take = budget
    while True:
        cut = pos + char_len(sizer.encoding.decode_bytes(tokens[:take]))
        cut = _word_boundary_before(text, pos, max(cut, pos + 1))
        span = trim(text, pos, cut)
        assert span is not None
        count = sizer.count(*span)
        if count <= budget or take == 1:
            return Sized(span[0], span[1], count)
        take = max(1, take - (count - budget))


def char_len(data: bytes) -> int:
    """Characters that start in ``data`` (a byte string that may end mid-character)."""
    return len(data.translate(None, _CONTINUATION))


def _word_boundary_before(text: str, start: int, cut: int) -> int:
    """``cut``, moved back to the whitespace before the word it would split, if there is one."""
    if cut >= len(text) or text[cut].isspace() or text[cut - 1].isspace():
        return cut
    i = cut - 1
    while i > start and not text[i].isspace():
        i -= 1
    return i if i > start else cut


def word_start(text: str, pos: int, limit: int) -> int | None:
    """The first start of a word at or after ``pos`` and before ``limit``."""
    match = _WORD_START.search(text, pos, limit)
    return match.start() if match else None
