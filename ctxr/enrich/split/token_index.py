"""Exact token counts of any span of a document, from one encoding of the whole document.

The splitters count many overlapping spans (sections, their blocks, the chunks packed from
them). Encoding each span anew costs two to three encodings of the document; this index
encodes it once and answers each count with two tiny encodings and two array lookups.

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
and ``b2`` the first and last such boundaries inside it: the direct parts are usually a word
or one line. If the document's encoding does not have a token boundary where the argument
says it must, the span is encoded directly, so a count is never an estimate.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import tiktoken

TRUSTED_ENCODINGS = frozenset(("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base"))
TRUSTED_ENCODINGS |= {"o200k_base", "o200k_harmony"}

# The index is built when a span of at least INDEX_MIN_CHARS is counted; once it exists, spans
# of INDEXED_MIN_CHARS or more use it. Shorter ones are encoded directly, which costs less
# than the lookups (measured with bench/split_compare.py).
INDEX_MIN_CHARS = 512
INDEXED_MIN_CHARS = 128

# A trusted boundary is the match's start (see the module docstring).
_BOUNDARY = re.compile(r"[ \t](?=\S)|(?<=\n)(?=[^\s/])")
_TAIL_WINDOW = 64  # characters searched back from a span's end for its last boundary


@functools.cache
def _token_bytes(encoding: tiktoken.Encoding) -> npt.NDArray[np.int64]:
    """Length in bytes of every ordinary token of ``encoding``, indexed by token id."""
    ranks: dict[bytes, int] | None = getattr(encoding, "_mergeable_ranks", None)
    lengths = np.zeros(encoding.n_vocab, dtype=np.int64)
    if ranks is not None:
        for token, rank in ranks.items():
            lengths[rank] = len(token)
        return lengths
    for rank in range(encoding.n_vocab):  # the public, slower way
        try:
            lengths[rank] = len(encoding.decode_single_token_bytes(rank))
        except KeyError:  # ids reserved for special tokens or unused
            continue
    return lengths


def char_byte_offsets(text: str) -> npt.NDArray[np.int64] | None:
    """UTF-8 byte offset at which each character starts (plus the end); None for ASCII."""
    if text.isascii():
        return None
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    offsets = np.zeros(len(points) + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    return offsets


class TokenIndex:
    """Token boundaries of one encoding of ``text``, as UTF-8 byte offsets."""

    def __init__(
        self,
        text: str,
        encoding: tiktoken.Encoding,
        byte_offsets: npt.NDArray[np.int64] | None,
    ) -> None:
        self.text = text
        tokens = encoding.encode_to_numpy(text, disallowed_special=())
        self._ends = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(_token_bytes(encoding)[tokens], out=self._ends[1:])
        self._byte_offsets = byte_offsets

    def tokens_before(self, pos: int) -> int | None:
        """How many of the document's tokens end at or before ``pos``, if one ends there."""
        byte = pos if self._byte_offsets is None else int(self._byte_offsets[pos])
        k = int(np.searchsorted(self._ends, byte))
        return k if k < len(self._ends) and int(self._ends[k]) == byte else None

    def count(self, start: int, end: int, direct: Callable[[int, int], int]) -> int:
        """Exact token count of ``text[start:end]``; ``direct`` encodes a span on its own."""
        text = self.text
        first = _BOUNDARY.search(text, start, end)
        last = _last_boundary(text, start, end)
        if first is None or last is None or last <= first.start():
            return direct(start, end)
        b1, b2 = first.start(), last
        k1, k2 = self.tokens_before(b1), self.tokens_before(b2)
        if k1 is None or k2 is None:  # cannot happen if the module's argument holds
            return direct(start, end)
        head = direct(start, b1) if b1 > start else 0
        return head + (k2 - k1) + direct(b2, end)


def _last_boundary(text: str, start: int, end: int) -> int | None:
    window = _TAIL_WINDOW
    while True:
        lo = max(start, end - window)
        found = None
        for match in _BOUNDARY.finditer(text, lo, end):
            found = match.start()
        if found is not None or lo == start:
            return found
        window *= 4
