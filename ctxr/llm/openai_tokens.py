"""How OpenAI counts and bills a request's prompt, without sending it (the cost estimate).

Every request's prompt is tokenized in full with the model's tiktoken encoding (exact; the
message framing, about 7 tokens a request, is not counted). Automatic prefix caching reads what
a request shares with its prefix's first, completed request, in 1,024 + 128·n token steps;
OpenAI bills no cache write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tiktoken.model

from ctxr.llm.base import LLM, PromptGroup, Usage
from ctxr.tokens import get_encoding

OPENAI_CACHE_MIN, OPENAI_CACHE_STEP = 1024, 128
# The fake server's rule (tests/fakes/llm_wire.py) for models tiktoken does not know.
_O200K = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4")


def openai_encoding(model: str) -> tuple[str, bool]:
    """The model's tiktoken encoding, and whether tiktoken itself knows the model."""
    try:
        return tiktoken.model.encoding_name_for_model(model), True
    except KeyError:
        return ("o200k_base" if model.startswith(_O200K) else "cl100k_base"), False


def openai_cached(shared_tokens: int) -> int:
    """OpenAI's automatic prefix caching: 0 below 1,024 shared tokens, else 1,024 + 128·n."""
    if shared_tokens < OPENAI_CACHE_MIN:
        return 0
    return shared_tokens - (shared_tokens - OPENAI_CACHE_MIN) % OPENAI_CACHE_STEP


def prompt_texts(body: dict[str, Any]) -> list[str]:
    """A chat request body's message texts, in order."""
    texts: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(str(part.get("text", "")) for part in content)
    return texts


def openai_usage(cached: bool, bodies: Sequence[dict[str, Any]], encoding: str) -> Usage:
    """The first request reads nothing; each later one reads what it shares with the first,
    in OpenAI's steps, when the prefix is cacheable."""
    enc = get_encoding(encoding)
    ids: list[np.ndarray[Any, np.dtype[np.uint32]]] = []
    for body in bodies:
        parts = [np.array(enc.encode_ordinary(t), np.uint32) for t in prompt_texts(body)]
        ids.append(np.concatenate(parts) if parts else np.array([], np.uint32))
    first, total, read = ids[0], 0, 0
    for k, tokens in enumerate(ids):
        total += len(tokens)
        if k and cached:
            n = min(len(first), len(tokens))
            differ = np.flatnonzero(first[:n] != tokens[:n])
            read += openai_cached(int(differ[0]) if len(differ) else n)
    return Usage(input_tokens=total - read, cache_read_tokens=read)


class OpenAICounter:
    """`RequestCounter` of OpenAI and OpenAI-compatible servers: the model's tiktoken
    encoding (exact where tiktoken knows the model), the bodies `llm` would send."""

    def __init__(self, llm: LLM, *, tokenizer: str = "auto", exact: bool = False) -> None:
        # `tokenizer` and `exact` choose among Claude's counters; tiktoken is OpenAI's own.
        self._llm = llm
        self.encoding, self.exact = openai_encoding(llm.model)
        self.label = self.encoding
        self.note = "exact (tiktoken)" if self.exact else "estimate (model unknown to tiktoken)"

    def notes(self) -> list[str]:
        return [
            "OpenAI tokens are exact for the prompt text; the chat framing (about 7 tokens a "
            "request) is not counted. Cached tokens follow automatic prefix caching (1,024 + "
            "128n tokens shared with the prefix's first request)"
        ]

    def prompt_usages(self, groups: Sequence[PromptGroup]) -> list[Usage]:
        return [
            openai_usage(g.cached, [self._llm.request_body(r) for r in g.requests], self.encoding)
            for g in groups
        ]
