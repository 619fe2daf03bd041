"""The one place SDK clients are made: credentials, base URLs and the placeholder key.

Every caller (the context writers, the LLM reranker, the OpenAI embedder) gets its Anthropic or
OpenAI client here, sync or async, with the SDK's own retries off: ctxr retries under its own
rate limits and must see every failure. None for a key or base URL lets the SDK read its own
environment variables."""

from __future__ import annotations

import os
from typing import Final

# An OpenAI-compatible server whose key is not needed (vLLM, Ollama, llama.cpp on loopback)
# still gets an Authorization header: the OpenAI SDK refuses to start without some key.
PLACEHOLDER_KEY: Final = "ctxr-no-key"


def openai_key(api_key: str | None, base_url: str | None) -> str | None:
    """The key to hand the OpenAI SDK: the given one, or None to let the SDK read
    OPENAI_API_KEY, or the placeholder when only a base URL (a local server) is configured."""
    if api_key or os.environ.get("OPENAI_API_KEY"):
        return api_key
    return PLACEHOLDER_KEY if base_url or os.environ.get("OPENAI_BASE_URL") else None
