"""Identifiers split into words for the dense embedder: ``parseHTTPResponse`` -> ``parse HTTP
Response``, ``observe_stdout`` -> ``observe stdout``.

MiniLM's word pieces were learnt on prose. An identifier reaches it as one word and comes
out as fragments that mean nothing (``parsehttpresponse`` -> ``parse ##ht ##tp ##res
##pon ##se``), and an underscore costs a word piece of its own; a query asks in words ("how
is the HTTP response parsed?"). Split, the identifier is words the model knows, and usually
fewer pieces, so more of the chunk fits its input. BM25 splits identifiers itself (see
``ctxr.index.bm25.analyzer``); this is the dense side's counterpart.

Where it applies: the dense text of code documents (``SPLIT_KINDS``; the chunker counts
their word pieces on the split text too, so what fits is what is embedded), and the queries
of an index that holds such documents (the manifest records, per document, whether it was
embedded split), so that both sides of a comparison read the same way. An index of prose
alone, or one built before this, is embedded and queried exactly as before.

Measured on the anthropic-codebase set (docs/explanation/evaluation.md): dense Pass@5 70.7 -> 74.1
and hybrid 80.8 -> 82.2, a rule fixed by hand, nothing tuned. A mixed-case word is split only
when every part is a word of its own (an acronym of two capitals or more, else three
characters or more), and an underscore only between letters or digits, so prose and the
terms of biology stay whole: ``mRNA``, ``miRNAs``, ``HbA1c``, ``iPhone``, ``NASA``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["SPLIT_KINDS", "dense_text", "split_counter", "split_identifiers", "splits"]

# Lower or digit then upper (parse|HTTP), or an upper run then upper + lower (HTTP|Response).
_CASE_CUT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# A word is a run of ASCII letters and digits from its first letter (``[A-Za-z][A-Za-z0-9]*``:
# leading digits are not part of it). Only a word with a capital after its first letter can be
# cut, so only those are matched (group 2; group 1 the run's leading digits): most words of
# code, and nearly all of prose, stay in the regex engine instead of costing a Python call.
_MIXED_WORD = re.compile(r"(?<![A-Za-z0-9])([0-9]*+)([A-Za-z][a-z0-9]*+[A-Z][A-Za-z0-9]*+)")
_SNAKE = re.compile(r"(?<=[A-Za-z0-9])_+(?=[A-Za-z0-9])")


def _split_word(word: str) -> str:
    if word.isupper() or (word[0].isupper() and word[1:].islower()):
        return word  # HTTP, Response: decided without a second regex
    parts = _CASE_CUT.split(word)
    if len(parts) < 2 or not all(_is_word(part) for part in parts):
        return word
    return " ".join(parts)


def _split_mixed(match: re.Match[str]) -> str:
    return match.group(1) + _split_word(match.group(2))


def _is_word(part: str) -> bool:
    """A part worth its own word: an acronym of 2+ capitals or digits (HTTP, X509), or 3+
    characters otherwise (parse, Response). Shorter mixed parts are what prose and biology
    write inside one term (miRNA, HbA1c, HeLa, SINEs), left whole."""
    if part.isupper() or part.isdigit():
        return len(part) >= 2
    return len(part) >= 3


def split_identifiers(text: str) -> str:
    """``text`` with camelCase and snake_case identifiers written as separate words."""
    return _MIXED_WORD.sub(_split_mixed, _SNAKE.sub(" ", text))


#: The document kinds whose dense text is split: the measured case. Prose, Markdown and the
#: rest are embedded as written (their mixed-case words are names and terms, not identifiers).
SPLIT_KINDS = frozenset(("code",))


def splits(kind: str, enabled: bool) -> bool:
    """Whether a document of ``kind`` is embedded with its identifiers split."""
    return enabled and kind in SPLIT_KINDS


def dense_text(text: str, split: bool) -> str:
    """The text the embedder reads: ``text``, with identifiers split when ``split``."""
    return split_identifiers(text) if split else text


def split_counter(count: Callable[[str], int], split: bool) -> Callable[[str], int]:
    """``count`` of the text the embedder will read (the split text when ``split``)."""
    if not split:
        return count
    return lambda text: count(split_identifiers(text))
