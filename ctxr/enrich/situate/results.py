"""What the situating queue returns per chunk, and its retry policy's shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ctxr.errors import ProviderError
from ctxr.types import Chunk, ContextualChunk


@dataclass(frozen=True, slots=True)
class SituateResult:
    """A chunk's context. `flagged` says why it is an outline fallback ("empty response", "too
    long", "not a context", "failed: <error>"); `error` holds the detail."""

    chunk_id: str
    context: str
    kind: Literal["llm", "outline"]
    flagged: str | None = None
    error: str | None = None
    from_cache: bool = False  # answered by the response cache, no request sent

    def contextual(self, chunk: Chunk) -> ContextualChunk:
        return ContextualChunk(chunk, self.context, self.kind)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter, in seconds; a `retry_after` is a floor on it."""

    initial: float = 1.0
    maximum: float = 60.0


def describe(exc: BaseException) -> str:
    if isinstance(exc, ProviderError):
        return f"{exc.status} {exc}" if exc.status else str(exc)
    return f"{type(exc).__name__}: {exc}"


def retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable
