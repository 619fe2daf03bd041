"""Word pieces of a text counted word by word, each distinct word encoded once.

The indexer counts word pieces far more often than it embeds: the code splitter asks whether
every candidate chunk, with its prefix, fits the model's input, and the write phase counts
every text it embeds. Encoding the whole text each time cost more than the splitting itself
(about 0.14 ms a count, 33,000 counts for 4,216 chunks of the anthropic-codebase files).

A BERT tokenizer's count is a sum over words: its normaliser works character by character,
its pre-tokeniser splits on whitespace (and punctuation) before WordPiece looks at a word, and
no token spans whitespace. So a text cut at ASCII whitespace (space, tab, line breaks: what
both Python and BERT take for whitespace; other spaces stay inside a segment, where the
tokenizer handles them) has the pieces of its segments, plus [CLS] and [SEP]. A segment's
count is kept, and text follows Zipf's law, so most segments are counted by a dict lookup.
Exactness was checked against the whole-text count on 37,000 pieces of the judged sets'
documents and ctxr's sources and on 100,000 random strings of unusual whitespace, accents,
CJK and special tokens (the tests keep a share of both, `tests/index/embed/test_embed.py`).
Counting 20,000 of those pieces took 3x less time than encoding them with nothing kept, 12x
less once their words were kept.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["PieceCounter"]

_ASCII_SPACE = re.compile(r"[ \t\n\r]+")
# Segments kept: about 150 bytes each, so at most ~10 MB. Longer segments (minified code, a
# base64 blob) are rare and seldom repeat: they are encoded each time, not kept.
_KEPT_SEGMENTS = 1 << 16
_KEPT_MAX_CHARS = 64


class PieceCounter:
    """`count(text)`: what ``tokenizer.encode(text, add_special_tokens=True)`` would give in
    length, for a BERT WordPiece tokenizer with no truncation (the caller's to ensure)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._kept = functools.lru_cache(maxsize=_KEPT_SEGMENTS)(self._encoded)

    def count(self, text: str) -> int:
        total = 2  # [CLS] and [SEP]
        kept = self._kept
        for segment in _ASCII_SPACE.split(text):
            if segment:
                total += (
                    kept(segment) if len(segment) <= _KEPT_MAX_CHARS else self._encoded(segment)
                )
        return total

    def _encoded(self, segment: str) -> int:
        return len(self._tokenizer.encode(segment, add_special_tokens=False).ids)
