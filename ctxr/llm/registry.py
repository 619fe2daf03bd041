"""The providers by name: which one a run uses, their default models, and making one.

The only place that picks a provider: the context writers, the estimate and the LLM reranker
all come here. The SDKs are imported only when a provider is made (`make_llm`,
`make_sync_llm`), so outline runs and searches never pay for importing them (the estimate
makes providers, without sending anything, to render exactly the request bodies a run would
send).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ctxr.errors import ConfigError
from ctxr.llm.base import LLM, SyncLLM

if TYPE_CHECKING:
    from ctxr.llm.anthropic import AnthropicLLM
    from ctxr.llm.openai import OpenAILLM

PROVIDERS: Final = ("anthropic", "openai")
DEFAULT_MODELS: Final[Mapping[str, str]] = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-4o-mini",
}
PROVIDER_ENV = "CTXR_LLM_PROVIDER"


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
    # ANTHROPIC_AUTH_TOKEN counts too: the Anthropic SDK accepts it in place of a key.
    configured = {
        "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    }
    for provider, names in configured.items():
        if any(env.get(name) for name in names):
            return provider
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
) -> AnthropicLLM | OpenAILLM:
    """The provider's adapter, its SDK imported here, on first use."""
    chosen = model or DEFAULT_MODELS.get(provider, "")
    cls: type[AnthropicLLM | OpenAILLM]
    if provider == "anthropic":
        from ctxr.llm.anthropic import AnthropicLLM as cls
    elif provider == "openai":
        from ctxr.llm.openai import OpenAILLM as cls
    else:
        raise ConfigError(f"unknown LLM provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    return cls(chosen, api_key, base_url, timeout, max_output_tokens, sync=sync)


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
    return _make(
        provider,
        model,
        sync=False,
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_output_tokens=max_output_tokens,
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
    return _make(
        provider,
        model,
        sync=True,
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_output_tokens=max_output_tokens,
    )
