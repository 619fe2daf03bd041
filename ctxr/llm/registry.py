"""The providers by name: which one a run uses, their default models, and making one.

The only place that picks a provider: the context writers, the estimate and the LLM reranker
all come here. The SDKs are imported only when a provider is made (`make_llm`,
`make_sync_llm`), so outline runs and searches never pay for importing them (the estimate
makes providers, without sending anything, to render exactly the request bodies a run would
send). The providers themselves are one table, `REGISTRY`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from ctxr.errors import ConfigError
from ctxr.llm.base import LLM, RequestCounter, SyncLLM


@dataclass(frozen=True, slots=True)
class ProviderEntry:
    """Everything ctxr needs to know to use a provider; its classes are named, not imported,
    so that a provider's SDK is imported only when it is used."""

    default_model: str
    env: tuple[str, ...]  # variables that make `--context auto` choose it, in order
    llm: str  # "module:Class" of its `LLM` (and `SyncLLM`), made as (model, key, base URL,
    # timeout, max output tokens, sync=...)
    counter: str  # "module:Class" of its `RequestCounter` (made as (llm, tokenizer=, exact=))
    cache_reads_count: bool  # cache reads count against its input-token rate limit


# A new provider is its module(s) and one entry here (first wins `--context auto`).
REGISTRY: Final[Mapping[str, ProviderEntry]] = {
    "anthropic": ProviderEntry(
        "claude-haiku-4-5",
        # ANTHROPIC_AUTH_TOKEN counts too: the Anthropic SDK accepts it in place of a key.
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        "ctxr.llm.anthropic:AnthropicLLM",
        "ctxr.llm.anthropic_tokens:AnthropicCounter",
        cache_reads_count=False,
    ),
    "openai": ProviderEntry(
        "gpt-4o-mini",
        ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
        "ctxr.llm.openai:OpenAILLM",
        "ctxr.llm.openai_tokens:OpenAICounter",
        cache_reads_count=True,
    ),
}
PROVIDERS: Final = tuple(REGISTRY)
DEFAULT_MODELS: Final[Mapping[str, str]] = {k: v.default_model for k, v in REGISTRY.items()}
PROVIDER_ENV = "CTXR_LLM_PROVIDER"


def entry(provider: str) -> ProviderEntry:
    """The registry's entry for `provider`, or a ConfigError naming the known ones."""
    found = REGISTRY.get(provider)
    if found is None:
        raise ConfigError(f"unknown LLM provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    return found


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def choose_provider(explicit: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The provider a run uses: the one set (`CTXR_LLM_PROVIDER`, a flag, a Python argument),
    else the one `detect_provider` finds in `env` (default: the process environment), else None.
    The context writers, the estimate and the LLM reranker all choose here."""
    if explicit:
        return detect_provider({PROVIDER_ENV: explicit})
    return detect_provider(os.environ if env is None else env)


def detect_provider(env: Mapping[str, str]) -> str | None:
    """The provider `--context auto` uses: an explicit CTXR_LLM_PROVIDER, else the first with a
    key or base URL configured (Anthropic before OpenAI), else None (outline contexts)."""
    explicit = env.get(PROVIDER_ENV, "").strip().lower()
    if explicit:
        if explicit not in PROVIDERS:
            raise ConfigError(
                f"{PROVIDER_ENV}={explicit!r} is not a provider; use one of {', '.join(PROVIDERS)}"
            )
        return explicit
    for provider, found in REGISTRY.items():
        if any(env.get(name) for name in found.env):
            return provider
    return None


def configured_base_url(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """The base URL `provider` is pointed at by its `*_BASE_URL` variable (what its SDK reads),
    or None for the provider's own API."""
    env = os.environ if env is None else env
    for name in entry(provider).env:
        if name.endswith("_BASE_URL") and env.get(name):
            return env[name]
    return None


def _make(
    provider: str,
    model: str | None,
    *,
    sync: bool,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    max_output_tokens: int,
) -> Any:
    """The provider's adapter, its SDK imported here, on first use."""
    found = entry(provider)
    cls = _load(found.llm)
    return cls(model or found.default_model, api_key, base_url, timeout, max_output_tokens,
               sync=sync)  # fmt: skip


def make_counter(llm: LLM, *, tokenizer: str = "auto", exact: bool = False) -> RequestCounter:
    """How `llm`'s provider counts and bills the requests `llm` would send (the estimate).
    `tokenizer` is CTXR_CLAUDE_TOKENIZER; `exact` asks the provider's own counting endpoint
    where it has one."""
    cls = _load(entry(llm.provider).counter)
    return cast(RequestCounter, cls(llm, tokenizer=tokenizer, exact=exact))


def cache_reads_count(provider: str) -> bool:
    """Whether cached prompt tokens count against `provider`'s input-token rate limit."""
    return entry(provider).cache_reads_count


def make_llm(
    provider: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    max_output_tokens: int = 200,
) -> LLM:
    """A provider by name, for async callers (the situating queue); `None` model, key or base
    URL leave the choice to the defaults and the SDK's own environment variables."""
    return cast(
        LLM,
        _make(
            provider,
            model,
            sync=False,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_output_tokens=max_output_tokens,
        ),
    )


def make_sync_llm(
    provider: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    max_output_tokens: int = 200,
) -> SyncLLM:
    """`make_llm` for sync callers (the reranker, inside a search running in a thread)."""
    return cast(
        SyncLLM,
        _make(
            provider,
            model,
            sync=True,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_output_tokens=max_output_tokens,
        ),
    )
