"""LLM providers behind the `LLM` protocol, the choice between them, and what they share.

The SDKs are imported only when a provider is made (`make_llm`), so outline runs and searches
never pay for importing them (the estimate makes providers, without sending anything, to
render exactly the request bodies a run would send). Both providers map their SDK's errors
onto `ProviderError` with the helpers here, so "retryable" means the same thing whichever
provider failed.
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from ctxr.enrich.llm import LLM, ProviderError
from ctxr.enrich.pricing import canonical_model
from ctxr.errors import ConfigError

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
# An OpenAI-compatible server whose key is not needed (vLLM, Ollama, llama.cpp on loopback)
# still gets an Authorization header: the OpenAI SDK refuses to start without some key.
PLACEHOLDER_KEY: Final = "ctxr-no-key"


def openai_key(api_key: str | None, base_url: str | None) -> str | None:
    """The key to hand the OpenAI SDK: the given one, or None to let the SDK read
    OPENAI_API_KEY, or the placeholder when only a base URL (a local server) is configured."""
    if api_key or os.environ.get("OPENAI_API_KEY"):
        return api_key
    return PLACEHOLDER_KEY if base_url or os.environ.get("OPENAI_BASE_URL") else None


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
        from ctxr.enrich.providers.anthropic import AnthropicLLM

        return AnthropicLLM(chosen, api_key, base_url, timeout, max_output_tokens)
    if provider == "openai":
        from ctxr.enrich.providers.openai import OpenAILLM

        return OpenAILLM(chosen, api_key, base_url, timeout, max_output_tokens)
    raise ConfigError(f"unknown LLM provider {provider!r}; use one of {', '.join(PROVIDERS)}")


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def rate_limit_headers(headers: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The rate-limit headers the queue's limiter reads, lower-cased."""
    keep = (prefix, "retry-after")
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(keep)}


def redact(text: str, secret: str | None) -> str:
    """`text` with any occurrence of the key removed: messages end up in logs and ledgers."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "[redacted]")
    return text


def safe_url(url: object) -> str:
    """A base URL for messages, without any user:password part."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def status_error(
    *,
    name: str,
    key_env: str,
    model: str,
    status: int,
    headers: Mapping[str, str],
    detail: str,
) -> ProviderError:
    """Map an HTTP error status to a `ProviderError`: 408, 409, 429 and 5xx (529 included)
    may succeed later; every other 4xx will fail the same way again."""
    retry_after = parse_retry_after(headers)
    if status in (401, 403):
        # The server's words are left out: some echo a part of the key that was sent.
        return ProviderError(
            f"{name} refused the credentials (HTTP {status}); check {key_env}",
            retryable=False,
            status=status,
        )
    if status == 404:
        message = f"{name} does not know model {model!r} (HTTP 404): {detail}"
        return ProviderError(message, retryable=False, status=status)
    if status == 429:
        wait = f", retry after {retry_after:g}s" if retry_after is not None else ""
        message = f"{name} rate limit reached (HTTP 429{wait}): {detail}"
        return ProviderError(message, retryable=True, retry_after=retry_after, status=status)
    retryable = status in (408, 409) or status >= 500
    kind = "overloaded" if status == 529 else "server error" if status >= 500 else "request error"
    return ProviderError(
        f"{name} {kind} (HTTP {status}): {detail}",
        retryable=retryable,
        retry_after=retry_after if retryable else None,
        status=status,
    )


def body_message(body: object) -> str | None:
    """`error.message` from an error body, the same place in both providers' formats."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return None


def short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def connection_error(
    name: str, base_url: str, exc: BaseException, timed_out: bool, secret: str | None
) -> ProviderError:
    """A failed connection or a timeout: always worth another try."""
    what = "timed out" if timed_out else "connection failed"
    cause = exc.__cause__ or exc
    detail = short(redact(str(cause) or type(cause).__name__, secret))
    return ProviderError(f"{name} {what} at {base_url}: {detail}", retryable=True)


def malformed(name: str, why: str) -> ProviderError:
    # Retryable: a proxy or an overloaded server can garble one response; the queue decides
    # how often to try again.
    return ProviderError(f"{name} sent a malformed response: {why}", retryable=True)
