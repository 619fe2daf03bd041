"""The one place SDK clients are made: credentials, base URLs and the placeholder key.

Every caller (the context writers, the LLM reranker, the OpenAI embedder, the exact token
count) gets its Anthropic or OpenAI client here, sync or async, with the SDK's own retries off:
ctxr retries under its own rate limits and must see every failure. None for a key or base URL
lets the SDK read its own environment variables. The SDKs are imported on first use, so code
that never calls a provider never imports one. Every client reads its generation and embedding
answers under a whole-request deadline (its `timeout`), generation answers up to a size cap
(`ctxr.llm.deadline`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Literal, overload

from ctxr.errors import ConfigError

if TYPE_CHECKING:
    import anthropic
    import openai

# A compatible server whose key is not needed (vLLM, Ollama, llama.cpp, an Anthropic-compatible
# proxy on loopback) still gets a credential header: both SDKs refuse to start without one.
PLACEHOLDER_KEY: Final = "ctxr-no-key"
OPENAI_KEY_ENV: Final = "OPENAI_API_KEY"


def openai_key(api_key: str | None, base_url: str | None) -> str | None:
    """The key to hand the OpenAI SDK: the given one, or None to let the SDK read
    OPENAI_API_KEY, or the placeholder when only a base URL (a local server) is configured."""
    if api_key or os.environ.get(OPENAI_KEY_ENV):
        return api_key
    return PLACEHOLDER_KEY if base_url or os.environ.get("OPENAI_BASE_URL") else None


def anthropic_key(api_key: str | None, base_url: str | None) -> str | None:
    """The key to hand the Anthropic SDK. Only a base URL with no credential at all (a local
    Anthropic-compatible server) gets the placeholder: passing a key would stop the SDK reading
    ANTHROPIC_AUTH_TOKEN."""
    has_credential = bool(
        api_key or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    )
    if not has_credential and (base_url or os.environ.get("ANTHROPIC_BASE_URL")):
        return PLACEHOLDER_KEY
    return api_key


@overload
def anthropic_client(
    *,
    sync: Literal[False] = ...,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    max_retries: int = 0,
) -> anthropic.AsyncAnthropic: ...
@overload
def anthropic_client(
    *,
    sync: Literal[True],
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    max_retries: int = 0,
) -> anthropic.Anthropic: ...
def anthropic_client(
    *,
    sync: bool = False,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    max_retries: int = 0,
) -> anthropic.Anthropic | anthropic.AsyncAnthropic:
    """An Anthropic SDK client; `max_retries` stays 0 except for free calls (count_tokens)."""
    import anthropic

    from ctxr.llm import deadline  # imports httpx2: on first use, as the SDKs

    key = anthropic_key(api_key, base_url)
    if sync:
        hooks = deadline.sync_hooks(deadline.ANTHROPIC_BOUNDS, timeout)
        http = anthropic.DefaultHttpxClient(event_hooks=hooks)
        return anthropic.Anthropic(
            api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout,
            http_client=http,
        )  # fmt: skip
    async_hooks = deadline.async_hooks(deadline.ANTHROPIC_BOUNDS, timeout)
    async_http = anthropic.DefaultAsyncHttpxClient(event_hooks=async_hooks)
    return anthropic.AsyncAnthropic(
        api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout,
        http_client=async_http,
    )  # fmt: skip


@overload
def openai_client(
    *,
    sync: Literal[False] = ...,
    name: str,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    hint: str = "",
) -> openai.AsyncOpenAI: ...
@overload
def openai_client(
    *,
    sync: Literal[True],
    name: str,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    hint: str = "",
) -> openai.OpenAI: ...
def openai_client(
    *,
    sync: bool = False,
    name: str,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    hint: str = "",
) -> openai.OpenAI | openai.AsyncOpenAI:
    """An OpenAI SDK client, or a ConfigError naming `name` and what to set (plus `hint`)."""
    import openai

    from ctxr.llm import deadline

    key = openai_key(api_key, base_url)
    try:
        if sync:
            hooks = deadline.sync_hooks(deadline.OPENAI_BOUNDS, timeout)
            http = openai.DefaultHttpxClient(event_hooks=hooks)
            return openai.OpenAI(
                api_key=key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http
            )
        async_hooks = deadline.async_hooks(deadline.OPENAI_BOUNDS, timeout)
        async_http = openai.DefaultAsyncHttpxClient(event_hooks=async_hooks)
        return openai.AsyncOpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout, http_client=async_http
        )
    except openai.OpenAIError as exc:
        raise ConfigError(
            f"{name}: no API key found; set {OPENAI_KEY_ENV}, or OPENAI_BASE_URL for a local "
            f"OpenAI-compatible server{hint}"
        ) from exc
