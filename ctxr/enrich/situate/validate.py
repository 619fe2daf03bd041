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
  and more), the chunk ids of a grouped request given back as answers (``c9``, ``c9, c10``),
  and a bare word or identifier (``load_config``, ``Overview.``): ``"not a context"``. A
  context is a phrase at least: an answer without a space passes only in a script written
  without spaces (Chinese, Japanese, Thai) and at ``MIN_UNSPACED_CHARS`` characters or more.

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
# An answer without whitespace in a script written without spaces: a phrase from 5 characters
# ("この関数は..." is a sentence; "设置", "settings", is a word).
MIN_UNSPACED_CHARS = 5

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


# Chunk ids as the grouped prompt names them (c1, c2, ...), alone or listed, and nothing else.
_CHUNK_IDS = re.compile(r"\W*c\d+(\W+c\d+)*\W*", re.IGNORECASE)


# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, CJK and kana,
# CJK compatibility ideographs, full-width forms.
_UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x2E80, 0x9FFF),
             (0xF900, 0xFAFF), (0xFF00, 0xFFEF))  # fmt: skip


def _unspaced(char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in _UNSPACED)


def _bare_word(body: str) -> bool:
    """One word, an identifier or a code path: no whitespace, unless in a script written
    without spaces and long enough to be a phrase."""
    if any(c.isspace() for c in body):
        return False
    return not (len(body) >= MIN_UNSPACED_CHARS and any(_unspaced(c) for c in body))


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
    if _CHUNK_IDS.fullmatch(body):
        return Verdict(NOT_A_CONTEXT, f"the chunk ids echoed: {body[:40]!r}")
    if _bare_word(body):
        return Verdict(NOT_A_CONTEXT, f"a bare word or identifier, not a phrase: {body[:40]!r}")
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
