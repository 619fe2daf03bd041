"""`OpenAILLM`: situates chunks through Chat Completions, on OpenAI or any compatible server.

OpenAI caches prompt prefixes of 1024 tokens and more automatically; there is no marker to send,
so `SituateRequest.cache` changes nothing on the wire (it still tells the queue and the estimate
whether to expect a cache read). What matters is that the document comes first and is
byte-identical for every chunk of it. The same client works against vLLM, Ollama or llama.cpp
through `OPENAI_BASE_URL`, which is how a user runs a local model.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import openai
from openai.types.chat import ChatCompletion, ChatCompletionUserMessageParam

from ctxr.enrich.situate.prompt import chunk_part, document_part
from ctxr.errors import ConfigError, ProviderError
from ctxr.llm import clients, error_map, registry
from ctxr.llm.base import Completion, SituateRequest, Usage

KEY_ENV = "OPENAI_API_KEY"
_NAME = "OpenAI"

ClientT = TypeVar("ClientT", openai.OpenAI, openai.AsyncOpenAI)


def make_client(
    client_class: type[ClientT],
    *,
    name: str,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    hint: str = "",
) -> ClientT:
    """An OpenAI SDK client that never retries on its own (its callers retry under their
    rate limits), or a ConfigError naming ``name`` and what to set (plus ``hint``)."""
    # None lets the SDK read OPENAI_API_KEY and OPENAI_BASE_URL itself. A local
    # OpenAI-compatible server usually needs no key, but the SDK refuses to start without
    # one, so a base URL without a key gets a placeholder the server ignores.
    api_key = clients.openai_key(api_key, base_url)
    try:
        return client_class(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
    except openai.OpenAIError as exc:
        raise ConfigError(
            f"{name}: no API key found; set {KEY_ENV}, or OPENAI_BASE_URL for a local "
            f"OpenAI-compatible server{hint}"
        ) from exc


# Reasoning models refuse `max_tokens` and any temperature but the default; the gpt-5 family
# (not 5.1+) accepts "minimal" effort, which keeps the output budget for the context itself.
_REASONING = re.compile(r"^(o\d|gpt-5)")
_MINIMAL_EFFORT = re.compile(r"^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$")


class OpenAILLM:
    """A context writer over Chat Completions; satisfies `ctxr.llm.base.LLM` structurally."""

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_output_tokens: int = 200,
    ) -> None:
        self._model = model
        self._max_output_tokens = max_output_tokens
        self._client = make_client(
            openai.AsyncOpenAI, name=_NAME, api_key=api_key, base_url=base_url, timeout=timeout
        )

    @property
    def provider(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    @property
    def min_cacheable_tokens(self) -> int:
        return registry.min_cacheable_tokens("openai", self._model)

    @property
    def base_url(self) -> str:
        return error_map.safe_url(self._client.base_url)

    def request_body(self, request: SituateRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for `request` (exposed for tests).

        One user message, the document first: the cached prefix is then the same tokens for
        every chunk, and chat templates of local models that fold or reject a system role
        (Gemma, some Mistral) see the same prompt as OpenAI does. The document is material to
        read, not an instruction, so it does not belong in a system message either.
        """
        prompt = (
            document_part(request.document)
            + "\n\n"
            + chunk_part(request.chunk, request.heading_path)
        )
        message: ChatCompletionUserMessageParam = {"role": "user", "content": prompt}
        body: dict[str, Any] = {"model": self._model, "messages": [message]}
        if _REASONING.match(self._model):
            body["max_completion_tokens"] = self._max_output_tokens
            if _MINIMAL_EFFORT.match(self._model):
                body["reasoning_effort"] = "minimal"
        else:
            body["max_tokens"] = self._max_output_tokens
            body["temperature"] = 0
        return body

    async def situate(self, request: SituateRequest) -> Completion:
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                **self.request_body(request)
            )
            headers = error_map.rate_limit_headers(raw.headers, "x-ratelimit-")
            # openai's raw responses are the "legacy" kind: `parse()` is synchronous.
            completion: ChatCompletion = raw.parse()
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APIConnectionError as exc:
            raise self._connection_error(exc) from None
        except (ValueError, openai.APIResponseValidationError) as exc:
            raise self._malformed(f"undecodable body ({type(exc).__name__})") from None
        return self._completion(completion, headers)

    def _completion(self, completion: ChatCompletion, headers: dict[str, str]) -> Completion:
        choices = getattr(completion, "choices", None)
        usage = getattr(completion, "usage", None)
        if not isinstance(choices, list) or not choices or usage is None:
            raise self._malformed("no choices or usage in the response")
        try:
            text = choices[0].message.content or ""
            prompt_tokens = int(usage.prompt_tokens or 0)
            details = getattr(usage, "prompt_tokens_details", None)
            cached = int(getattr(details, "cached_tokens", None) or 0)
            billed = Usage(
                # Match Anthropic's convention: input_tokens excludes the cached ones.
                input_tokens=max(0, prompt_tokens - cached),
                cache_write_tokens=0,  # OpenAI bills no cache writes
                cache_read_tokens=cached,
                output_tokens=int(usage.completion_tokens or 0),
            )
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise self._malformed(f"unexpected response shape ({type(exc).__name__})") from None
        model = getattr(completion, "model", None)
        return Completion(
            str(text).strip(), billed, model if isinstance(model, str) else self._model, headers
        )

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        detail = error_map.body_message(exc.body) or exc.message
        return error_map.status_error(
            name=_NAME,
            key_env=KEY_ENV,
            model=self._model,
            status=exc.status_code,
            headers=exc.response.headers,
            detail=self._clean(str(detail)),
        )

    def _connection_error(self, exc: openai.APIConnectionError) -> ProviderError:
        timed_out = isinstance(exc, openai.APITimeoutError)
        return error_map.connection_error(
            _NAME, self.base_url, exc, timed_out, self._client.api_key
        )

    def _malformed(self, why: str) -> ProviderError:
        return error_map.malformed(_NAME, why)

    def _clean(self, text: str) -> str:
        return error_map.short(error_map.redact(text, self._client.api_key))

    async def aclose(self) -> None:
        await self._client.close()
