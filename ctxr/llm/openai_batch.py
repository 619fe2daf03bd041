"""OpenAI's Batch API for `OpenAILLM` (see `ctxr.llm.batch` for the contract).

A batch is a JSONL file uploaded with purpose "batch" (one `/v1/chat/completions` request a
line, each body exactly what `chat.completions.create` would send), then a batch naming it.
Once the batch is completed, expired or cancelled, the output file holds the answered requests
and the error file the others (`batch_expired`, `batch_cancelled`, or an HTTP status per line);
a failed batch (its file did not validate) has `errors` and no output at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from ctxr.errors import ProviderError
from ctxr.llm.base import Completion, CompletionRequest
from ctxr.llm.batch import BatchItem, BatchLimits, BatchOutcome, BatchStatus, outcome_error

LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
ENDPOINT: Literal["/v1/chat/completions"] = "/v1/chat/completions"
ENDED = {"completed", "failed", "expired", "cancelled"}
_NAME = "OpenAI"


def item_line(item: BatchItem, render: Callable[[CompletionRequest], dict[str, Any]]) -> bytes:
    line = {
        "custom_id": item.custom_id,
        "method": "POST",
        "url": ENDPOINT,
        "body": render(item.request),
    }
    return json.dumps(line, ensure_ascii=False).encode("utf-8", "replace") + b"\n"


async def submit(
    client: openai.AsyncOpenAI,
    items: Sequence[BatchItem],
    render: Callable[[CompletionRequest], dict[str, Any]],
) -> str:
    data = b"".join(item_line(item, render) for item in items)
    upload = await client.files.create(
        file=("ctxr-batch.jsonl", data, "application/jsonl"), purpose="batch"
    )
    batch = await client.batches.create(
        input_file_id=upload.id, endpoint=ENDPOINT, completion_window="24h"
    )
    return batch.id


async def status(client: openai.AsyncOpenAI, batch_id: str) -> BatchStatus:
    batch = await client.batches.retrieve(batch_id)
    counts = batch.request_counts
    return BatchStatus(
        batch_id=batch.id,
        ended=batch.status in ENDED,
        state=batch.status,
        counts={}
        if counts is None
        else {"total": counts.total, "completed": counts.completed, "failed": counts.failed},
    )


async def results(
    client: openai.AsyncOpenAI,
    batch_id: str,
    to_completion: Callable[[ChatCompletion], Completion],
) -> dict[str, BatchOutcome]:
    batch = await client.batches.retrieve(batch_id)
    outcomes: dict[str, BatchOutcome] = {}
    if batch.status == "failed":
        # The input file did not validate: the batch carries the reason, per line or whole.
        reasons = [
            e.message or e.code or "invalid" for e in (batch.errors and batch.errors.data) or []
        ]
        raise outcome_error(
            _NAME, "failed", "; ".join(reasons)[:500] or "no reason given", retryable=False
        )
    for file_id in (batch.output_file_id, batch.error_file_id):
        if not file_id:
            continue
        content = await client.files.content(file_id)
        for raw in content.text.splitlines():
            if raw.strip():
                custom_id, outcome = _line(raw, to_completion)
                if custom_id:
                    outcomes[custom_id] = outcome
    return outcomes


def _line(
    raw: str, to_completion: Callable[[ChatCompletion], Completion]
) -> tuple[str, BatchOutcome]:
    try:
        line = json.loads(raw)
        custom_id = str(line.get("custom_id") or "")
    except (ValueError, AttributeError):
        return "", outcome_error(_NAME, "unreadable", "a result line is not JSON", retryable=True)
    error = line.get("error") or {}
    code = str(error.get("code") or "") if isinstance(error, dict) else ""
    if code == "batch_expired":
        return custom_id, outcome_error(
            _NAME, "expired", "the batch ended before it ran", retryable=True
        )
    if code == "batch_cancelled":
        return custom_id, outcome_error(
            _NAME, "canceled", "the batch was canceled", retryable=False
        )
    response = line.get("response") or {}
    status_code = int(response.get("status_code") or 0) if isinstance(response, dict) else 0
    body = response.get("body") if isinstance(response, dict) else None
    if status_code != 200 or not isinstance(body, dict):
        detail = body.get("error", {}).get("message") if isinstance(body, dict) else None
        message = f"HTTP {status_code or '?'}: {detail or code or 'no answer'}"
        retryable = status_code in (0, 408, 409, 429) or status_code >= 500
        return custom_id, outcome_error(_NAME, "errored", message, retryable=retryable)
    try:
        return custom_id, to_completion(ChatCompletion.model_validate(body))
    except (ValidationError, ProviderError):
        return custom_id, outcome_error(_NAME, "errored", "a malformed answer", retryable=True)
