"""Anthropic Message Batches for `AnthropicLLM` (see `ctxr.llm.batch` for the contract).

A batch item's `params` are exactly the body `messages.create` would send (the same cache
breakpoints, so items of one document can share its cache entry, best effort), with the SDK's
`extra_body` folded in: a batch request has no such wrapper. Results stream as JSONL from the
batch's `results_url` once `processing_status` is "ended"; each line is succeeded, errored,
canceled or expired.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
from anthropic.types import Message

from ctxr.errors import ProviderError
from ctxr.llm.base import Completion, CompletionRequest
from ctxr.llm.batch import BatchItem, BatchLimits, BatchOutcome, BatchStatus, outcome_error

LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024)
_NAME = "Anthropic"
# Error types a later batch may not repeat (Anthropic's error shapes).
_TRANSIENT = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


def batch_params(body: dict[str, Any]) -> dict[str, Any]:
    """`messages.create` keyword arguments as a batch request's `params`."""
    params = {k: v for k, v in body.items() if k != "extra_body"}
    params.update(body.get("extra_body") or {})
    return params


def item_line(
    item: BatchItem, render: Callable[[CompletionRequest], dict[str, Any]]
) -> dict[str, Any]:
    return {"custom_id": item.custom_id, "params": batch_params(render(item.request))}


def item_bytes(item: BatchItem, render: Callable[[CompletionRequest], dict[str, Any]]) -> int:
    return len(json.dumps(item_line(item, render), ensure_ascii=False).encode("utf-8", "replace"))


async def submit(
    client: anthropic.AsyncAnthropic,
    items: Sequence[BatchItem],
    render: Callable[[CompletionRequest], dict[str, Any]],
) -> str:
    lines: Any = [item_line(item, render) for item in items]
    batch = await client.messages.batches.create(requests=lines)
    return batch.id


async def status(client: anthropic.AsyncAnthropic, batch_id: str) -> BatchStatus:
    batch = await client.messages.batches.retrieve(batch_id)
    counts = batch.request_counts
    return BatchStatus(
        batch_id=batch.id,
        ended=batch.processing_status == "ended",
        state=batch.processing_status,
        counts={
            "processing": counts.processing,
            "succeeded": counts.succeeded,
            "errored": counts.errored,
            "canceled": counts.canceled,
            "expired": counts.expired,
        },
    )


async def results(
    client: anthropic.AsyncAnthropic,
    batch_id: str,
    to_completion: Callable[[Message], Completion],
) -> dict[str, BatchOutcome]:
    outcomes: dict[str, BatchOutcome] = {}
    async for line in await client.messages.batches.results(batch_id):
        outcomes[line.custom_id] = _outcome(line.result, to_completion)
    return outcomes


def _outcome(result: Any, to_completion: Callable[[Message], Completion]) -> BatchOutcome:
    kind = getattr(result, "type", None)
    if kind == "succeeded":
        try:
            return to_completion(result.message)
        except ProviderError as exc:  # a malformed message: a later batch may do better
            return exc
    if kind == "errored":
        error = getattr(getattr(result, "error", None), "error", None)
        error_type = str(getattr(error, "type", "error"))
        message = str(getattr(error, "message", "") or error_type)
        return outcome_error(_NAME, "errored", message, retryable=error_type in _TRANSIENT)
    if kind == "expired":
        return outcome_error(_NAME, "expired", "the batch ended before it ran", retryable=True)
    if kind == "canceled":
        return outcome_error(_NAME, "canceled", "the batch was canceled", retryable=False)
    return outcome_error(_NAME, "unreadable", f"result type {kind!r}", retryable=True)
