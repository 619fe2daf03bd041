"""The contract between the situating queue and the LLM providers.

A provider turns one `SituateRequest` (a document held in the provider's prompt cache, and one
of its chunks) into a `Completion` (the context text and the token usage the provider billed).
It does no retrying and no rate limiting of its own: the queue owns both, so that one policy
(tenacity backoff honouring retry-after, client-side limits) covers every provider. A provider
signals what went wrong with `ProviderError`, saying whether a retry can help.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens as billed. `input_tokens` excludes the cached ones (Anthropic's convention; an
    OpenAI provider subtracts its `cached_tokens` from `prompt_tokens` to match)."""

    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.output_tokens + other.output_tokens,
        )


@dataclass(frozen=True, slots=True)
class SituateRequest:
    """One chunk to situate. Requests with the same `document` share one cached prefix."""

    document: str  # the whole document, or the window of it that fits the model
    chunk: str
    heading_path: tuple[str, ...] = ()
    cache: bool = True  # False below the model's minimum cacheable size: send no cache marker


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    usage: Usage
    model: str
    # The provider's rate-limit response headers, lower-cased (anthropic-ratelimit-*,
    # x-ratelimit-*), so the queue's limiter can adapt to what the server says is left.
    rate_limit_headers: Mapping[str, str] = field(default_factory=dict)


class LLM(Protocol):
    """A context writer. Implementations: `AnthropicLLM`, `OpenAILLM` (and test fakes)."""

    @property
    def provider(self) -> str: ...  # "anthropic" | "openai": part of the response-cache key

    @property
    def model(self) -> str: ...

    @property
    def min_cacheable_tokens(self) -> int: ...  # below this a prefix is never cached

    async def situate(self, request: SituateRequest) -> Completion: ...

    async def aclose(self) -> None: ...
