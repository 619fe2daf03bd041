"""`OpenAILLM`: completions through Chat Completions, on OpenAI or any compatible server.

OpenAI caches prompt prefixes of 1024 tokens and more automatically; there is no marker to send,
so `CompletionRequest.cache` changes nothing on the wire (it still tells the queue and the
estimate whether to expect a cache read). What matters is that the prefix comes first and is
byte-identical for every request that shares it. A JSON schema becomes a strict
`response_format`. The same client works against vLLM, Ollama or llama.cpp through
`OPENAI_BASE_URL`, which is how a user runs a local model.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionUserMessageParam

from ctxr.errors import ProviderError
from ctxr.llm import cache_minimums, clients, deadline, error_map, openai_batch
from ctxr.llm.base import Completion, CompletionRequest, Usage
from ctxr.llm.batch import BatchItem, BatchLimits, BatchOutcome, BatchStatus, provider_call

KEY_ENV = "OPENAI_API_KEY"
_NAME = "OpenAI"

# Reasoning models refuse `max_tokens` and any temperature but the default; the gpt-5 family
# (not 5.1+) accepts "minimal" effort, which keeps the output budget for the context itself.
_REASONING = re.compile(r"^(o\d|gpt-5)")
_MINIMAL_EFFORT = re.compile(r"^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$")


class OpenAILLM:
    """Satisfies `ctxr.llm.base.LLM` (or, made with `sync=True`, `SyncLLM`) structurally."""

    def __init__(
        self,
        model: str = "gpt-4o-mini",
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
        self._async: openai.AsyncOpenAI | None = None
        self._sync: openai.OpenAI | None = None
        if sync:
            self._sync = clients.openai_client(
                sync=True, name=_NAME, api_key=api_key, base_url=base_url, timeout=timeout
            )
        else:
            self._async = clients.openai_client(
                name=_NAME, api_key=api_key, base_url=base_url, timeout=timeout
            )

    @property
    def _client(self) -> openai.OpenAI | openai.AsyncOpenAI:
        client = self._sync or self._async
        assert client is not None  # __init__ makes exactly one
        return client

    @property
    def provider(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    @property
    def min_cacheable_tokens(self) -> int:
        return cache_minimums.min_cacheable_tokens("openai", self._model)

    @property
    def base_url(self) -> str:
        return error_map.safe_url(self._client.base_url)

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for `request`.

        One user message, the prefix first: the cached prefix is then the same tokens for
        every request, and chat templates of local models that fold or reject a system role
        (Gemma, some Mistral) see the same prompt as OpenAI does. The document is material to
        read, not an instruction, so it does not belong in a system message either.
        """
        prompt = (
            f"{request.prefix}\n\n{request.instruction}" if request.prefix else request.instruction
        )
        message: ChatCompletionUserMessageParam = {"role": "user", "content": prompt}
        body: dict[str, Any] = {"model": self._model, "messages": [message]}
        budget = request.max_output_tokens or self._max_output_tokens
        if _REASONING.match(self._model):
            body["max_completion_tokens"] = budget
            if _MINIMAL_EFFORT.match(self._model):
                body["reasoning_effort"] = "minimal"
        else:
            body["max_tokens"] = budget
            body["temperature"] = 0
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "schema": dict(request.json_schema),
                    "strict": True,
                },
            }
        return body

    async def complete(self, request: CompletionRequest) -> Completion:
        if self._async is None:
            raise TypeError("this OpenAILLM was made with sync=True; call complete_sync")
        try:
            # The whole request, not each read: a server dripping its answer a byte at a time
            # would otherwise hold it for as long as it likes (ctxr.llm.deadline).
            async with asyncio.timeout(self._timeout):
                raw = await self._async.chat.completions.with_raw_response.create(
                    **self.request_body(request)
                )
                headers = error_map.rate_limit_headers(raw.headers, "x-ratelimit-")
                # openai's raw responses are the "legacy" kind: `parse()` is synchronous.
                completion: ChatCompletion = raw.parse()
        except Exception as exc:
            if (error := self._error(exc)) is None:
                raise
            raise error from None
        return self._completion(completion, headers)

    def complete_sync(self, request: CompletionRequest) -> Completion:
        if self._sync is None:
            raise TypeError("this OpenAILLM was made for async use; call complete")
        try:
            raw = self._sync.chat.completions.with_raw_response.create(**self.request_body(request))
            headers = error_map.rate_limit_headers(raw.headers, "x-ratelimit-")
            completion: ChatCompletion = raw.parse()
        except Exception as exc:
            if (error := self._error(exc)) is None:
                raise
            raise error from None
        return self._completion(completion, headers)

    def _error(self, exc: Exception) -> ProviderError | None:
        """The SDK's failure as a `ProviderError`; None for anything unforeseen (re-raised)."""
        if isinstance(exc, openai.APIStatusError):
            return self._status_error(exc)
        if isinstance(exc, TimeoutError):  # the whole-request deadline
            secret = self._client.api_key
            return error_map.connection_error(
                _NAME, self.base_url, exc, True, secret, self._timeout
            )
        if (large := deadline.too_large(exc)) is not None:
            return error_map.too_large(_NAME, self.base_url, large)
        if isinstance(exc, openai.APIConnectionError):
            timed_out = isinstance(exc, openai.APITimeoutError)
            secret = self._client.api_key
            return error_map.connection_error(
                _NAME, self.base_url, exc, timed_out, secret, self._timeout
            )
        if isinstance(exc, ValueError | openai.APIResponseValidationError):
            return error_map.malformed(_NAME, f"undecodable body ({type(exc).__name__})")
        return None

    def _completion(self, completion: ChatCompletion, headers: dict[str, str]) -> Completion:
        choices = getattr(completion, "choices", None)
        usage = getattr(completion, "usage", None)
        if not isinstance(choices, list) or not choices or usage is None:
            raise error_map.malformed(_NAME, "no choices or usage in the response")
        try:
            text = choices[0].message.content or ""
            prompt_tokens = int(usage.prompt_tokens or 0)
            details = getattr(usage, "prompt_tokens_details", None)
            cached = int(getattr(details, "cached_tokens", None) or 0)
            # From GPT-5.6 on, OpenAI bills cache writes (1.25x) and reports them here.
            written = int(getattr(details, "cache_write_tokens", None) or 0)
            billed = Usage(
                # Match Anthropic's convention: input_tokens excludes the cached ones.
                input_tokens=max(0, prompt_tokens - cached - written),
                cache_write_tokens=written,
                cache_read_tokens=cached,
                output_tokens=int(usage.completion_tokens or 0),
            )
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise error_map.malformed(
                _NAME, f"unexpected response shape ({type(exc).__name__})"
            ) from None
        model = getattr(completion, "model", None)
        truncated = getattr(choices[0], "finish_reason", None) == "length"
        return Completion(
            str(text).strip(),
            billed,
            model if isinstance(model, str) else self._model,
            headers,
            truncated,
        )

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        detail = error_map.body_message(exc.body) or exc.message
        return error_map.status_error(
            name=_NAME,
            key_env=KEY_ENV,
            model=self._model,
            status=exc.status_code,
            headers=exc.response.headers,
            detail=error_map.short(error_map.redact(str(detail), self._client.api_key)),
            body=exc.body,
        )

    # -- the Batch API (ctxr.llm.batch.BatchLLM) -----------------------------------------------

    @property
    def batch_limits(self) -> BatchLimits:
        return openai_batch.LIMITS

    def batch_item_bytes(self, item: BatchItem) -> int:
        return len(openai_batch.item_line(item, self.request_body))

    async def submit_batch(self, items: Sequence[BatchItem]) -> str:
        call = openai_batch.submit(self._batch_client(), items, self.request_body)
        return await provider_call(call, self._error)

    async def batch_status(self, batch_id: str) -> BatchStatus:
        call = openai_batch.status(self._batch_client(), batch_id)
        return await provider_call(call, self._error)

    async def batch_results(self, batch_id: str) -> dict[str, BatchOutcome]:
        convert = functools.partial(self._completion, headers={})
        call = openai_batch.results(self._batch_client(), batch_id, convert)
        return await provider_call(call, self._error)

    def _batch_client(self) -> Any:
        if self._async is None:
            raise TypeError("batches need an async OpenAILLM; make it without sync=True")
        return self._async

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.close()

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
