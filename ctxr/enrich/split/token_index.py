"""Exact token counts of any span of a document, from one encoding of the whole document.

The splitters count many overlapping spans (sections, their blocks, the chunks packed from
them). Encoding each span anew costs two to three encodings of the document; this index
encodes it once and answers each count with two array lookups and at most two tiny
encodings.

Why the answer is exact: tiktoken encodes in two stages. A regular expression cuts the text
into pieces, then byte-pair merging turns each piece into tokens, never across pieces. So
between two positions that are piece boundaries both in the document and in a span's own
text, the span's tokens are exactly the document's tokens there. Two kinds of position are
piece boundaries in every text that contains them, for the patterns of the encodings in
``TRUSTED_ENCODINGS`` (gpt2/r50k/p50k/cl100k/o200k):

* a space or tab followed by a non-whitespace character. No piece crosses it from the left:
  word, number and punctuation pieces contain no space or tab except one leading one, the
  line-break pieces end on ``\\r`` or ``\\n``, and the whitespace-run piece ``\\s+(?!\\S)``
  stops short of the last whitespace character before a non-whitespace one. Whatever the
  piece starting there is (`` word``, `` 42``, a lone space), it starts there.
* a line start (after ``\\n``) whose first character is neither whitespace nor ``/``. Only
  line-break and whitespace pieces hold a ``\\n``, and they end at the newline; o200k's
  punctuation piece may run on into ``/`` after a newline (``.\\n/``), hence the exception.

A span ``[s, e)`` is counted as ``direct(s, b1) + tokens(b1..b2) + direct(b2, e)``, with ``b1``
and ``b2`` the first and last such boundaries inside it: the direct parts are usually a word,
counted once per document. Most span ends need no encoding at all: a span that ends in a
letter or digit before whitespace ends on a piece boundary of the document too, so ``b2`` is
the end itself (``_last_piece`` has the rule and its exceptions). If the document's encoding
does not have a token boundary where the argument says it must, the span is encoded
directly, so a count is never an estimate. The tests compare every span of texts full of the
patterns' hazards with its direct encoding.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import tiktoken

TRUSTED_ENCODINGS = frozenset(("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base"))
TRUSTED_ENCODINGS |= {"o200k_base", "o200k_harmony"}

# Texts of at least INDEX_MIN_CHARS get an index; spans of INDEXED_MIN_CHARS or more use it.
# Shorter ones are encoded directly, which costs less than the lookups (measured with
# bench/peers/split_compare.py).
INDEX_MIN_CHARS = 512
INDEXED_MIN_CHARS = 32

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_DIGITS = frozenset(string.digits)
# Python calls these whitespace; tiktoken's patterns (\s is Unicode White_Space) do not.
_NOT_REGEX_SPACE = frozenset("\x1c\x1d\x1e\x1f")
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))  # UTF-8 bytes that do not start a character
# A trusted boundary is the match's start (see the module docstring).
_BOUNDARY = re.compile(r"[ \t](?=\S)|(?<=\n)(?=[^\s/])")


@functools.cache
def _token_tables(
    encoding: tiktoken.Encoding,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Per token id: how many characters start in it (its bytes that are not UTF-8
    continuation bytes), and whether it starts with a continuation byte."""
    ranks: dict[bytes, int] | None = getattr(encoding, "_mergeable_ranks", None)
    if ranks is None:  # the public, slower way
        ranks = {}
        for rank in range(encoding.n_vocab):
            try:
                ranks[encoding.decode_single_token_bytes(rank)] = rank
            except KeyError:  # ids reserved for special tokens or unused
                continue
    starts = np.zeros(encoding.n_vocab, dtype=np.int64)
    continues = np.zeros(encoding.n_vocab, dtype=np.bool_)
    for token, rank in ranks.items():
        starts[rank] = len(token.translate(None, _CONTINUATION_BYTES))
        continues[rank] = 0x80 <= token[0] < 0xC0
    return starts, continues


# A span edge resolved against the index: (boundary, document tokens before it, tokens of the
# span between its edge and the boundary). A boundary is found from one edge alone (the first
# one at or after a start, the last one before an end), so edges are cached and shared by
# every span that starts or ends there: packing pieces into a chunk costs two lookups.
_Edge = tuple[int, int, int]


class TokenIndex:
    """Where the tokens of one encoding of ``text`` end, as character offsets.

    A token may end inside a character (tiktoken splits rare characters into bytes). Ends
    are kept as keys: ``2 * offset`` for an end on a character boundary, ``2 * offset - 1``
    for one inside the character before ``offset``, so the keys stay sorted, a lookup of
    ``2 * pos`` only ever finds a real boundary, and a key's index is the tokens before it.
    """

    def __init__(self, text: str, encoding: tiktoken.Encoding) -> None:
        self.text = text
        tokens = encoding.encode_to_numpy(text, disallowed_special=())
        starts, continues = _token_tables(encoding)
        # An array, not a list: converting every token end would cost more than the lookups.
        keys = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(starts[tokens], out=keys[1:])
        keys *= 2
        if not text.isascii():
            keys[1:-1] -= continues[tokens[1:]]  # the next token continues a character
        self._keys = keys
        self._size = len(keys)
        self._heads: dict[int, _Edge] = {}
        self._tails: dict[int, _Edge] = {}
        self._words: dict[str, int] = {}

    def tokens_before(self, pos: int) -> int | None:
        """How many of the document's tokens end at or before ``pos``, if one ends there."""
        key = 2 * pos
        k = int(self._keys.searchsorted(key))
        return k if k < self._size and self._keys[k] == key else None

    def start_of_last(self, pos: int, tokens: int) -> int:
        """Where the document's last ``tokens`` tokens ending at or before ``pos`` begin (the
        character holding that token's first byte)."""
        k = int(self._keys.searchsorted(2 * pos, side="right")) - 1  # the last end <= pos
        key = int(self._keys[max(0, k - tokens)])
        return key // 2 if key % 2 == 0 else (key + 1) // 2 - 1

    def count(self, start: int, end: int, direct: Callable[[int, int], int]) -> int:
        """Exact token count of ``text[start:end]``; ``direct`` encodes a span on its own."""
        head = self._heads.get(start) or self._head(start, end, direct)
        tail = self._tails.get(end) or self._tail(start, end, direct)
        if head is None or tail is None or head[0] > tail[0]:
            return direct(start, end)
        return head[2] + (tail[1] - head[1]) + tail[2]

    def _head(self, start: int, end: int, direct: Callable[[int, int], int]) -> _Edge | None:
        text = self.text
        if start < end and _is_line_start(text, start):
            boundary = start  # the usual case, without the search
        else:
            found = _BOUNDARY.search(text, start, end)
            if found is None:
                return None  # there may be one beyond ``end``: nothing to cache
            boundary = found.start()
        before = self.tokens_before(boundary)
        if before is None:  # cannot happen if the module's argument holds
            return None
        edge = (boundary, before, self._word(start, boundary, direct))
        self._heads[start] = edge
        return edge

    def _word(self, start: int, end: int, direct: Callable[[int, int], int]) -> int:
        """Tokens of a span's short end ("|", ".", "});", an indented line's first word):
        they recur, so each is counted once per document."""
        if start == end:
            return 0
        word = self.text[start:end]
        tokens = self._words.get(word)
        if tokens is None:
            tokens = self._words[word] = direct(start, end)
        return tokens

    def _tail(self, start: int, end: int, direct: Callable[[int, int], int]) -> _Edge | None:
        piece = _last_piece(self.text, start, end)
        boundary = piece if piece is not None else _last_boundary(self.text, start, end)
        if boundary is None:
            return None
        before = self.tokens_before(boundary)
        if before is None:
            return None
        tokens = self._word(boundary, end, direct)
        edge = (boundary, before, tokens)
        self._tails[end] = edge
        return edge


def _last_piece(text: str, start: int, end: int) -> int | None:
    """Where the span's last piece starts, when it is also a piece start of the document and
    that piece ends at ``end`` in the document too (then the span's tokens up to it are the
    document's), or None.

    When the document goes on with whitespace after ``end``, only punctuation reaches
    across: ``.\n\n`` is one piece in the document and ``.`` in the span. So a span that
    ends in a letter or digit, or before whitespace other than a line break, ends on a
    document piece boundary (``end`` itself). One that ends in ASCII punctuation before a
    line break has that run (with one space before it) as its own last piece, starting
    after a letter, a digit or a space. Anything else (a symbol, or a letter right after
    ``end`` that could take the last character as its prefix) gets None.
    """
    if end - start < 1 or text[end - 1].isspace():
        return None
    if end == len(text):
        return end
    last, after = text[end - 1], text[end]
    if not after.isspace() or after in _NOT_REGEX_SPACE:
        return None  # a letter, digit or symbol may continue the document's piece
    if after not in "\r\n" or _is_word_char(last):
        return end
    if last not in _ASCII_PUNCTUATION:
        return None
    run = end - 1
    while run > 0 and text[run - 1] in _ASCII_PUNCTUATION:
        run -= 1
    if run > 0 and text[run - 1] == " ":
        run -= 1
    elif run > 0 and not _is_word_char(text[run - 1]):
        return None
    return run if run >= start else None


def _last_boundary(text: str, start: int, end: int) -> int | None:
    """The last trusted boundary in ``text[start:end]`` (see ``_BOUNDARY``), if any."""
    if end - start < 2:  # (and ``end - 1`` below must not be a negative index)
        return None
    best = None
    # The last space or tab before a non-whitespace character: search back from the end.
    for blank in (" ", "\t"):
        pos = end - 1
        floor = start if best is None else best + 1
        while (pos := text.rfind(blank, floor, pos)) >= 0:
            if not text[pos + 1].isspace():
                best = pos
                break
    # The last line start whose first character is neither whitespace nor "/".
    pos = end - 1
    while (pos := text.rfind("\n", max(start - 1, 0), pos)) >= 0:
        if pos + 1 >= start and _is_line_start(text, pos + 1):
            return pos + 1 if best is None or pos + 1 > best else best
        if best is not None and pos < best:
            break
    return best


def _is_line_start(text: str, pos: int) -> bool:
    """The line-start kind of trusted boundary (``_BOUNDARY``'s second branch), at ``pos``."""
    first = text[pos]
    return pos > 0 and text[pos - 1] == "\n" and first != "/" and not first.isspace()


def _is_word_char(char: str) -> bool:
    """A letter or an ASCII digit: a piece that ends in one ends before whitespace."""
    return char.isalpha() or char in _DIGITS
