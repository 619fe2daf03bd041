"""The contract between ctxr and an LLM provider: one general completion, cached prefix first.

A request (`CompletionRequest`) is an optional prefix that the provider may hold in its prompt
cache (a whole document, marked cacheable where it reaches the model's minimum), then an
instruction, and optionally a JSON schema the answer must follow. The situating queue
(`ctxr.enrich.situate`) and the LLM reranker (`ctxr.retrieve.rerank.llm`) both speak it; each
renders its own prompt. A provider turns a request into a `Completion` (the answer's text and
the token usage it billed). It does no retrying and no rate limiting of its own: its callers own
both, so that one policy (backoff honouring retry-after, client-side limits) covers every
provider. Failures are `ctxr.errors.ProviderError`, saying whether a retry can help.

`request_body` is part of the protocol: the estimate renders exactly the bodies a run would
send, without sending them. How a provider counts and bills those bodies (its tokenizer, where
its cache begins, what it adds unseen) is its `RequestCounter`, found through the registry, so
the estimate prices any provider's requests without knowing which one it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# How long Anthropic keeps a cache entry: "5m" (writes 1.25x input) or "1h" (writes 2x input),
# chosen where a document's requests span more than five minutes (batches, long queues).
CacheTTL = Literal["5m", "1h"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens as billed. `input_tokens` excludes the cached ones (Anthropic's convention; an
    OpenAI provider subtracts its `cached_tokens` from `prompt_tokens` to match)."""

    input_tokens: int = 0
    cache_write_tokens: int = 0  # 5-minute cache writes (all of OpenAI's, which bills none)
    cache_read_tokens: int = 0
    output_tokens: int = 0
    cache_write_1h_tokens: int = 0  # Anthropic's 1-hour cache writes, priced apart

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token, cached or not."""
        return (
            self.input_tokens
            + self.cache_write_tokens
            + self.cache_write_1h_tokens
            + self.cache_read_tokens
        )


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """One prompt. Requests with the same `prefix` share one cached prefix."""

    instruction: str  # what follows the prefix: the part that changes per request
    prefix: str = ""  # sent first, the part a provider caches (a document); "" for none
    cache: bool = True  # False below the model's minimum cacheable size: send no cache marker
    # A JSON schema the answer must follow (Anthropic: forced tool use; OpenAI: strict
    # response_format); the completion's text is then the JSON document.
    json_schema: Mapping[str, Any] | None = None
    max_output_tokens: int | None = None  # None: the provider's own setting
    cache_ttl: CacheTTL = "5m"  # Anthropic only; OpenAI's automatic cache has no such choice


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    usage: Usage
    model: str
    # The provider's rate-limit response headers, lower-cased (anthropic-ratelimit-*,
    # x-ratelimit-*), so the queue's limiter can adapt to what the server says is left.
    rate_limit_headers: Mapping[str, str] = field(default_factory=dict)
    # The model stopped at the output budget (OpenAI finish_reason "length", Anthropic
    # stop_reason "max_tokens"): the text is cut off, a runaway the budget hid.
    truncated: bool = False


class LLM(Protocol):
    """A provider. Implementations: `AnthropicLLM`, `OpenAILLM` (and test fakes)."""

    @property
    def provider(self) -> str: ...  # "anthropic" | "openai": part of the response-cache key

    @property
    def model(self) -> str: ...

    @property
    def min_cacheable_tokens(self) -> int: ...  # below this a prefix is never cached

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The SDK call's keyword arguments for `request`, as they would be sent."""
        ...

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def aclose(self) -> None: ...


class SyncLLM(Protocol):
    """The same provider for sync callers (the reranker runs inside a search, in a thread)."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    def complete_sync(self, request: CompletionRequest) -> Completion: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PromptGroup:
    """Requests sent under one prefix, in the order they are sent. With `cached`, the first
    writes the provider's cache and completes before the others, which read it; without, every
    request sends the whole prompt as plain input."""

    requests: Sequence[CompletionRequest]
    cached: bool


class RequestCounter(Protocol):
    """How a provider counts and bills prompts, without sending them (the cost estimate).
    Implementations: `ctxr.llm.anthropic_tokens.AnthropicCounter`,
    `ctxr.llm.openai_tokens.OpenAICounter`; made by `ctxr.llm.registry.make_counter`."""

    @property
    def label(self) -> str: ...  # the tokenizer, for the report: an encoding name or "ctok"

    @property
    def encoding(self) -> str: ...  # tiktoken encoding of document sizes, comparable

    @property
    def exact(self) -> bool: ...  # the counts are the provider's own

    @property
    def note(self) -> str: ...  # how far the counts can be trusted, in a few words

    def notes(self) -> list[str]:
        """What a reader of the estimate should know about these counts."""
        ...

    def prompt_usages(self, groups: Sequence[PromptGroup]) -> list[Usage]:
        """Each group's prompt tokens as the provider bills them (no output tokens)."""
        ...
