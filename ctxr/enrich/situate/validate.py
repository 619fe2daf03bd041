"""Is this response a context? Cheap checks that catch what a model returns instead of one.

A context is one or two sentences that situate a chunk (Anthropic's prompt asks for "a short
succinct context"); typical answers are 50-100 tokens. What comes back instead, and what these
checks reject:

- nothing (an empty or whitespace-only body): ``"empty response"``;
- a runaway generation: more than ``max_tokens`` tokens (default 600, three times a 200-token
  output budget) or more than ``max_chars`` characters (default 4,000): ``"too long"``;
- a refusal or an assistant preamble ("I cannot ...", "As an AI ...", "I'm sorry ..."), the
  chunk copied back whole, a long verbatim copy of the document, or the prompt's own markup
  echoed (``<document>``, ``<chunk>``): ``"not a context"``.

The queue retries such a response once, then falls back to the outline context and flags the
chunk with the reason (the first element of the verdict); the detail goes into the chunk's error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

EMPTY = "empty response"
TOO_LONG = "too long"
NOT_A_CONTEXT = "not a context"

DEFAULT_MAX_TOKENS = 600
DEFAULT_MAX_CHARS = 4_000
# Shorter chunks may legitimately be quoted whole (an identifier, a one-line heading).
MIN_ECHOED_CHUNK_CHARS = 80
# A context may quote a phrase of the document; 200 verbatim characters is copying.
MIN_COPIED_DOCUMENT_CHARS = 200

_REFUSAL = re.compile(
    r"^(i\s+(cannot|can't|can\s+not|am\s+unable|'m\s+unable|am\s+not\s+able|won't|will\s+not)\b"
    r"|i'm\s+sorry|i\s+am\s+sorry|sorry,|as\s+an\s+ai\b|as\s+a\s+language\s+model"
    r"|i\s+apologi[sz]e|unfortunately,\s+i\b)",
    re.IGNORECASE,
)
_PROMPT_MARKUP = re.compile(r"</?(document|chunk)>", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a response is not a context: `reason` is one of the three flags, `detail` says more."""

    reason: str
    detail: str


def check_context(
    text: str,
    *,
    chunk: str,
    document: str,
    count_tokens: Callable[[str], int],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> Verdict | None:
    """None when `text` looks like a context for `chunk`, else why it does not."""
    body = text.strip()
    if not body:
        return Verdict(EMPTY, "the model returned no text")
    if len(body) > max_chars:
        return Verdict(TOO_LONG, f"{len(body)} characters (limit {max_chars})")
    tokens = count_tokens(body)
    if tokens > max_tokens:
        return Verdict(TOO_LONG, f"{tokens} tokens (limit {max_tokens})")
    opening = body.lstrip("\"'`*# ")
    if _REFUSAL.match(opening):
        return Verdict(NOT_A_CONTEXT, f"a refusal: {opening[:60]!r}")
    if _PROMPT_MARKUP.search(body):
        return Verdict(NOT_A_CONTEXT, "the prompt's markup echoed")
    stripped_chunk = chunk.strip()
    if len(stripped_chunk) >= MIN_ECHOED_CHUNK_CHARS and stripped_chunk in body:
        return Verdict(NOT_A_CONTEXT, "the chunk copied back verbatim")
    if len(body) >= MIN_COPIED_DOCUMENT_CHARS and body in document:
        return Verdict(NOT_A_CONTEXT, "a verbatim copy of the document")
    return None
