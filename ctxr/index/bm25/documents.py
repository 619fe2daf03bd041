"""Whole-document BM25: one sparse vector per short document, on its first chunk.

Why: a claim's terms are spread over an abstract, and chunks break them apart: on SciFact BM25
over whole abstracts scores 0.686 nDCG@10 against 0.658-0.670 over 200-token chunks. Giving
every chunk its neighbours' terms instead (a "BM25 window") failed: the candidates filled with
several chunks of one document, and a term's document frequency counted chunks. So the
document's terms go into a second sparse vector (`DOCUMENT_VECTOR`) held by ONE point per
document, its first chunk (the carrier): Qdrant's IDF over that vector counts documents, and
a third ranking (documents) joins the dense and chunk BM25 rankings at query time
(`ctxr.retrieve.documents`).

Only prose documents of at most `max_tokens` tiktoken tokens get one (`CTXR_DOC_BM25_TOKENS`,
1,024 chosen on SciFact's train queries): a long document is many topics, one bag of its words
says little, and the chunk rankings already find its parts. Code gets none: on the
anthropic-codebase set the third ranking cost 3.8 Pass@5 points (docs/explanation/evaluation.md), a
file being a set of definitions looked up one at a time rather than one argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

# The kinds whose short documents are one argument read as a whole (not code or notebooks).
DOCUMENT_KINDS: Final = frozenset({"markdown", "text", "html", "pdf", "conversation", "rst",
                                   "office"})  # fmt: skip

# Documents average about 4 characters a tiktoken token (English prose; code and other languages
# fewer): a text longer than 32 characters per allowed token is too long without counting.
CHARS_PER_TOKEN_CEILING = 32


def carries_document_vector(
    kind: str, text: str, max_tokens: int, count_tokens: Callable[[str], int]
) -> bool:
    """Whether a document of `kind` and `text` gets a whole-document BM25 vector (a
    `max_tokens` of 0 turns them off)."""
    if max_tokens <= 0 or kind not in DOCUMENT_KINDS or not text.strip():
        return False
    if len(text) > max_tokens * CHARS_PER_TOKEN_CEILING:
        return False  # certainly too long: skip tokenising a large file for nothing
    return count_tokens(text) <= max_tokens
