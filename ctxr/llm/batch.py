"""The contract for a provider's Batch API: many completions submitted at once, at half price.

Anthropic's Message Batches and OpenAI's Batch API (Files + Batches) both take a list of
requests, each with a caller-chosen `custom_id`, run them within 24 hours and return the results
in any order, matched by `custom_id`. A `BatchLLM` submits `BatchItem`s, reports a batch's
`BatchStatus`, and once it has ended gives one `BatchOutcome` per custom id: the `Completion`,
or a `ProviderError` saying whether a later batch may succeed (errored for a transient reason,
expired) or not (invalid, canceled). Retrying, journaling and progress belong to the caller
(`ctxr.enrich.situate.batch`), as for single requests.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ctxr.errors import ProviderError
from ctxr.llm.base import LLM, Completion, CompletionRequest

# Both providers: 1-64 characters of [a-zA-Z0-9_-].
CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DIGEST_CHARS = 40


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one batch may hold (Anthropic: 100,000 requests or 256 MB; OpenAI: 50,000 requests
    or a 200 MB input file)."""

    max_requests: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class BatchItem:
    custom_id: str
    request: CompletionRequest


@dataclass(frozen=True, slots=True)
class BatchStatus:
    batch_id: str
    ended: bool  # every request has an outcome; results can be read
    state: str  # the provider's own word: in_progress, ended, completed, expired, ...
    counts: Mapping[str, int] = field(default_factory=dict)


class BatchRequestError(ProviderError):
    """One request of a batch did not succeed; `kind` is how it ended: errored, expired,
    canceled, failed (the whole batch was refused), missing (absent from the results)."""

    def __init__(self, message: str, *, kind: str, retryable: bool) -> None:
        super().__init__(message, retryable=retryable)
        self.kind = kind


BatchOutcome = Completion | ProviderError


@runtime_checkable
class BatchLLM(LLM, Protocol):
    """A provider with a Batch API (`AnthropicLLM`, `OpenAILLM`)."""

    @property
    def batch_limits(self) -> BatchLimits: ...

    def batch_item_bytes(self, item: BatchItem) -> int:
        """The item's size as it counts against `batch_limits.max_bytes`."""
        ...

    async def submit_batch(self, items: Sequence[BatchItem]) -> str:
        """Submit `items` as one batch; its id. Raises `ProviderError`."""
        ...

    async def batch_status(self, batch_id: str) -> BatchStatus: ...

    async def batch_results(self, batch_id: str) -> dict[str, BatchOutcome]:
        """One outcome per custom id of an ended batch; ids the provider did not answer are
        absent (the caller decides what a missing answer means)."""
        ...


_T = TypeVar("_T")


async def provider_call(
    call: Awaitable[_T], to_error: Callable[[Exception], ProviderError | None]
) -> _T:
    """Await a provider SDK call, its failures as the provider's `ProviderError` (`to_error`
    returns None for anything unforeseen, which is re-raised as it is)."""
    try:
        return await call
    except ProviderError:
        raise
    except Exception as exc:
        if (error := to_error(exc)) is None:
            raise
        raise error from None


def custom_id_for(body: Mapping[str, Any], occurrence: int = 1) -> str:
    """A request's custom id, derived from its body: the same request gets the same id in a
    later run, which is what lets a restarted run find the batches an earlier one submitted.
    `occurrence` counts deliberate re-asks of the same body (a validation retry) in one run."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    name = f"r{digest[:_DIGEST_CHARS]}"
    return name if occurrence == 1 else f"{name}_{occurrence}"


def outcome_error(provider: str, kind: str, message: str, *, retryable: bool) -> BatchRequestError:
    """The error a batch result stands for, naming the provider and what happens next."""
    then = "asked again in a later batch" if retryable else "not retried"
    text = f"{provider} batch request {kind}: {message} ({then})"
    return BatchRequestError(text, kind=kind, retryable=retryable)
