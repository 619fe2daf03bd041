"""LLM providers behind the `LLM` protocol, the choice between them, and what they share.

The SDKs are imported only when a provider is made (`make_llm`), so outline runs and searches
never pay for importing them (the estimate makes providers, without sending anything, to
render exactly the request bodies a run would send). Both providers map their SDK's errors
onto `ProviderError` with the helpers here, so "retryable" means the same thing whichever
provider failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ctxr.errors import ConfigError
from ctxr.llm.base import LLM
from ctxr.llm.pricing import canonical_model

PROVIDERS: Final = ("anthropic", "openai")
DEFAULT_MODELS: Final[Mapping[str, str]] = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-4o-mini",
}
PROVIDER_ENV = "CTXR_LLM_PROVIDER"

# Minimum cacheable prompt length in tokens, from Anthropic's prompt-caching documentation
# (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching, table as quoted in
# anthropics/anthropic-sdk-python issue #1194, read 2026-11-29): 4096 for Opus 4.6/4.5 and
# Haiku 4.5; 2048 for Haiku 3.5 and Haiku 3; 1024 for Sonnet 4.6/4.5/4/3.7 and Opus 4.1/4.
# Keys are canonical names (snapshot dates and -latest/-0 suffixes removed).
ANTHROPIC_MIN_CACHEABLE: Final[Mapping[str, int]] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-3-opus": 1024,
}
# An unknown Claude model gets the largest documented minimum: treating a cacheable document
# as uncached costs some money, but marking one the server will not cache breaks the
# one-write-per-document schedule and makes the estimate promise savings that never come.
ANTHROPIC_DEFAULT_MIN_CACHEABLE: Final = 4096
# OpenAI caches prompts of 1024 tokens and more, for every model that caches at all
# (https://platform.openai.com/docs/guides/prompt-caching).
OPENAI_MIN_CACHEABLE: Final = 1024


def min_cacheable_tokens(provider: str, model: str) -> int:
    if provider == "anthropic":
        return ANTHROPIC_MIN_CACHEABLE.get(canonical_model(model), ANTHROPIC_DEFAULT_MIN_CACHEABLE)
    return OPENAI_MIN_CACHEABLE


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
    # ANTHROPIC_AUTH_TOKEN counts too: the Anthropic SDK accepts it in place of a key.
    configured = {
        "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    }
    for provider, names in configured.items():
        if any(env.get(name) for name in names):
            return provider
    return None


def make_llm(
    provider: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    max_output_tokens: int = 200,
) -> LLM:
    """A provider by name; `None` model, key or base URL leave the choice to the defaults and
    the SDK's own environment variables."""
    chosen = model or DEFAULT_MODELS.get(provider, "")
    if provider == "anthropic":
        from ctxr.llm.anthropic import AnthropicLLM

        return AnthropicLLM(chosen, api_key, base_url, timeout, max_output_tokens)
    if provider == "openai":
        from ctxr.llm.openai import OpenAILLM

        return OpenAILLM(chosen, api_key, base_url, timeout, max_output_tokens)
    raise ConfigError(f"unknown LLM provider {provider!r}; use one of {', '.join(PROVIDERS)}")
