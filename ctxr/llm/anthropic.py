"""`AnthropicLLM`: completions from Claude through the Messages API and its prompt cache.

The prefix (a document) goes in its own content block carrying the `cache_control` breakpoint,
and the instruction follows in a second block, so every request with that prefix reads the one
cached copy. A JSON schema becomes forced tool use (one tool, `tool_choice` naming it): the
tool call's input is the answer. The SDK's own retries are off (`max_retries=0`): callers
retry, with one policy for every provider, and must see each failure to adapt their limits.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence
from typing import Any

import anthropic
from anthropic.types import Message, TextBlockParam

from ctxr.errors import ProviderError
from ctxr.llm import anthropic_batch, cache_minimums, clients, deadline, error_map
from ctxr.llm.base import Completion, CompletionRequest, Usage
from ctxr.llm.batch import BatchItem, BatchLimits, BatchOutcome, BatchStatus, provider_call

KEY_ENV = "ANTHROPIC_API_KEY"
ANSWER_TOOL = "answer"  # the one tool a schema-bound request must call
_NAME = "Anthropic"


class AnthropicLLM:
    """Satisfies `ctxr.llm.base.LLM` (or, made with `sync=True`, `SyncLLM`) structurally."""

    def __init__(
        self,
        model: str = "claude-haiku-4-5",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_output_tokens: int = 200,
        *,
        sync: bool = False,
    ) -> None:
        self._model = model
        self._max_output_tokens = max_output_tokens
        self._timeout = timeout
        self._async: anthropic.AsyncAnthropic | None = None
        self._sync: anthropic.Anthropic | None = None
        if sync:
            self._sync = clients.anthropic_client(
                sync=True, api_key=api_key, base_url=base_url, timeout=timeout
            )
        else:
            self._async = clients.anthropic_client(
                api_key=api_key, base_url=base_url, timeout=timeout
            )

    @property
    def _client(self) -> anthropic.Anthropic | anthropic.AsyncAnthropic:
        client = self._sync or self._async
        assert client is not None  # __init__ makes exactly one
        return client

    @property
    def provider(self) -> str:
        return "anthropic"

    @property
    def model(self) -> str:
        return self._model

    @property
    def min_cacheable_tokens(self) -> int:
        return cache_minimums.min_cacheable_tokens("anthropic", self._model)

    @property
    def base_url(self) -> str:
        return error_map.safe_url(self._client.base_url)

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create` for `request`."""
        blocks: list[TextBlockParam] = []
        if request.prefix:
            prefix: TextBlockParam = {"type": "text", "text": request.prefix}
            if request.cache:
                # The breakpoint goes on the prefix block, never on the last block: the SDK's
                # top-level `cache_control` would mark the instruction and cache every request
                # separately.
                prefix["cache_control"] = (
                    {"type": "ephemeral", "ttl": "1h"}
                    if request.cache_ttl == "1h"
                    else {"type": "ephemeral"}
                )
            blocks.append(prefix)
        blocks.append({"type": "text", "text": request.instruction})
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_output_tokens or self._max_output_tokens,
            "messages": [{"role": "user", "content": blocks}],
            # anthropic 2.14's `messages.create` has no `temperature` parameter, but the
            # Messages API still accepts it in the body; temperature 0 keeps answers stable
            # across re-runs, so it travels as an extra body field.
            "extra_body": {"temperature": 0},
        }
        if request.json_schema is not None:
            body["tools"] = [
                {
                    "name": ANSWER_TOOL,
                    "description": "Give the answer, following the input schema exactly.",
                    "input_schema": dict(request.json_schema),
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
        return body

    async def complete(self, request: CompletionRequest) -> Completion:
        if self._async is None:
            raise TypeError("this AnthropicLLM was made with sync=True; call complete_sync")
        try:
            # The whole request, not each read: a server dripping its answer a byte at a time
            # would otherwise hold it for as long as it likes (ctxr.llm.deadline).
            async with asyncio.timeout(self._timeout):
                raw = await self._async.messages.with_raw_response.create(
                    **self.request_body(request)
                )
                headers = error_map.rate_limit_headers(raw.headers, "anthropic-ratelimit-")
                message: Message = await raw.parse()
        except Exception as exc:
            if (error := self._error(exc)) is None:
                raise
            raise error from None
        return self._completion(message, headers)

    def complete_sync(self, request: CompletionRequest) -> Completion:
        if self._sync is None:
            raise TypeError("this AnthropicLLM was made for async use; call complete")
        try:
            raw = self._sync.messages.with_raw_response.create(**self.request_body(request))
            headers = error_map.rate_limit_headers(raw.headers, "anthropic-ratelimit-")
            message: Message = raw.parse()
        except Exception as exc:
            if (error := self._error(exc)) is None:
                raise
            raise error from None
        return self._completion(message, headers)

    def _error(self, exc: Exception) -> ProviderError | None:
        """The SDK's failure as a `ProviderError`; None for anything unforeseen (re-raised)."""
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc)
        if isinstance(exc, TimeoutError):  # the whole-request deadline
            secret = self._client.api_key
            return error_map.connection_error(
                _NAME, self.base_url, exc, True, secret, self._timeout
            )
        if (large := deadline.too_large(exc)) is not None:
            return error_map.too_large(_NAME, self.base_url, large)
        if isinstance(exc, anthropic.APIConnectionError):
            timed_out = isinstance(exc, anthropic.APITimeoutError)
            secret = self._client.api_key
            return error_map.connection_error(
                _NAME, self.base_url, exc, timed_out, secret, self._timeout
            )
        if isinstance(exc, TypeError) and "authentication" in str(exc):
            # Raised by the SDK before sending when it finds no credential at all.
            return ProviderError(
                f"{_NAME}: no API key found; set {KEY_ENV} (or ANTHROPIC_BASE_URL for a local "
                "server)",
                retryable=False,
            )
        if isinstance(exc, ValueError | anthropic.APIResponseValidationError):
            return error_map.malformed(_NAME, f"undecodable body ({type(exc).__name__})")
        return None

    def _completion(self, message: Message, headers: dict[str, str]) -> Completion:
        content = getattr(message, "content", None)
        usage = getattr(message, "usage", None)
        if not isinstance(content, list) or usage is None:
            raise error_map.malformed(_NAME, "no content or usage in the response")
        try:
            tool_inputs = [
                block.input for block in content if getattr(block, "type", None) == "tool_use"
            ]
            if tool_inputs:
                text = json.dumps(tool_inputs[0], ensure_ascii=False)
            else:
                text = "".join(
                    block.text for block in content if getattr(block, "type", None) == "text"
                )
            written = int(usage.cache_creation_input_tokens or 0)
            # The split by TTL, where the API gives it: 1-hour writes cost more.
            by_ttl = getattr(usage, "cache_creation", None)
            hour = int(getattr(by_ttl, "ephemeral_1h_input_tokens", None) or 0)
            billed = Usage(
                input_tokens=int(usage.input_tokens or 0),
                cache_write_tokens=max(0, written - hour),
                cache_read_tokens=int(usage.cache_read_input_tokens or 0),
                output_tokens=int(usage.output_tokens or 0),
                cache_write_1h_tokens=min(hour, written) if written else hour,
            )
        except (AttributeError, TypeError, ValueError) as exc:
            why = f"unexpected response shape ({type(exc).__name__})"
            raise error_map.malformed(_NAME, why) from None
        model = getattr(message, "model", None)
        truncated = getattr(message, "stop_reason", None) == "max_tokens"
        return Completion(
            text.strip(),
            billed,
            model if isinstance(model, str) else self._model,
            headers,
            truncated,
        )

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        detail = (
            getattr(exc, "api_message", None) or error_map.body_message(exc.body) or exc.message
        )
        return error_map.status_error(
            name=_NAME,
            key_env=KEY_ENV,
            model=self._model,
            status=exc.status_code,
            headers=exc.response.headers,
            detail=error_map.short(error_map.redact(str(detail), self._client.api_key)),
        )

    # -- the Batch API (ctxr.llm.batch.BatchLLM) -----------------------------------------------

    @property
    def batch_limits(self) -> BatchLimits:
        return anthropic_batch.LIMITS

    def batch_item_bytes(self, item: BatchItem) -> int:
        return anthropic_batch.item_bytes(item, self.request_body)

    async def submit_batch(self, items: Sequence[BatchItem]) -> str:
        call = anthropic_batch.submit(self._batch_client(), items, self.request_body)
        return await provider_call(call, self._error)

    async def batch_status(self, batch_id: str) -> BatchStatus:
        call = anthropic_batch.status(self._batch_client(), batch_id)
        return await provider_call(call, self._error)

    async def batch_results(self, batch_id: str) -> dict[str, BatchOutcome]:
        convert = functools.partial(self._completion, headers={})
        call = anthropic_batch.results(self._batch_client(), batch_id, convert)
        return await provider_call(call, self._error)

    def _batch_client(self) -> Any:
        if self._async is None:
            raise TypeError("batches need an async AnthropicLLM; make it without sync=True")
        return self._async

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.close()

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
