"""Is this response a context? Cheap checks that catch what a model returns instead of one.

A context is one or two sentences that situate a chunk (Anthropic's prompt asks for "a short
succinct context"); typical answers are 50-100 tokens. What comes back instead, and what these
checks reject:

- nothing (an empty or whitespace-only body): ``"empty response"``;
- a runaway generation: cut off at the request's output budget (the provider says so:
  `Completion.truncated`), more than ``max_tokens`` tokens (default 600, three times a
  200-token output budget; a server that ignores the budget) or more than ``max_chars``
  characters (default 4,000): ``"too long"``;
- a refusal or an assistant preamble ("I cannot ...", "As an AI ...", "I'm sorry ..."), the
  chunk copied back whole, a long verbatim copy of the document, or the prompt's own markup
  echoed (``<document>``, ``<chunk>``, and the heading-trail line ``The chunk sits under:
  ...`` / ``Chunk c1 sits under: ...`` at the start of a line, which small local models
  repeat in place of a context; the outline context that replaces it holds the same headings
  and more): ``"not a context"``.

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
_PROMPT_MARKUP = re.compile(
    r"</?(document|chunk)>|^\W*(the\s+chunk|chunk\s+c\d+)\s+sits\s+under:",
    re.IGNORECASE | re.MULTILINE,
)


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
    truncated: bool = False,
) -> Verdict | None:
    """None when `text` looks like a context for `chunk`, else why it does not. `truncated`:
    the provider reported that the answer stopped at the output budget."""
    body = text.strip()
    if not body:
        return Verdict(EMPTY, "the model returned no text")
    if truncated:
        return Verdict(TOO_LONG, "cut off at the output budget (CTXR_LLM_MAX_OUTPUT_TOKENS)")
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
