"""`AnthropicLLM`: situates chunks with Claude through the Messages API and its prompt cache.

The document goes in its own content block carrying the `cache_control` breakpoint, and the
chunk part follows in a second block, so every chunk of a document reads the one cached prefix.
The SDK's own retries are off (`max_retries=0`): the queue retries, with one policy for every
provider, and must see each failure to adapt its rate limit.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic
from anthropic.types import Message, TextBlockParam

from ctxr.enrich.situate.prompt import chunk_part, document_part
from ctxr.errors import ProviderError
from ctxr.llm import clients, error_map, registry
from ctxr.llm.base import Completion, SituateRequest, Usage

KEY_ENV = "ANTHROPIC_API_KEY"
_NAME = "Anthropic"


class AnthropicLLM:
    """A context writer on Claude; satisfies `ctxr.llm.base.LLM` structurally."""

    def __init__(
        self,
        model: str = "claude-haiku-4-5",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_output_tokens: int = 200,
    ) -> None:
        self._model = model
        self._max_output_tokens = max_output_tokens
        # None lets the SDK read ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) and
        # ANTHROPIC_BASE_URL itself. Only a base URL with no credential at all (a local
        # Anthropic-compatible server) gets a placeholder, since the SDK will not send a
        # request without one; passing a key would stop it reading ANTHROPIC_AUTH_TOKEN.
        has_credential = bool(
            api_key or os.environ.get(KEY_ENV) or os.environ.get("ANTHROPIC_AUTH_TOKEN")
        )
        if not has_credential and (base_url or os.environ.get("ANTHROPIC_BASE_URL")):
            api_key = clients.PLACEHOLDER_KEY
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
        )

    @property
    def provider(self) -> str:
        return "anthropic"

    @property
    def model(self) -> str:
        return self._model

    @property
    def min_cacheable_tokens(self) -> int:
        return registry.min_cacheable_tokens("anthropic", self._model)

    @property
    def base_url(self) -> str:
        return error_map.safe_url(self._client.base_url)

    def request_body(self, request: SituateRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create` for `request` (exposed for tests)."""
        document: TextBlockParam = {"type": "text", "text": document_part(request.document)}
        if request.cache:
            # The breakpoint goes on the document block, never on the last block: the SDK's
            # top-level `cache_control` would mark the chunk and cache every chunk separately.
            document["cache_control"] = {"type": "ephemeral"}
        chunk: TextBlockParam = {
            "type": "text",
            "text": chunk_part(request.chunk, request.heading_path),
        }
        return {
            "model": self._model,
            "max_tokens": self._max_output_tokens,
            "messages": [{"role": "user", "content": [document, chunk]}],
            # anthropic 2.14's `messages.create` has no `temperature` parameter, but the
            # Messages API still accepts it in the body; temperature 0 keeps contexts stable
            # across re-runs, so it travels as an extra body field.
            "extra_body": {"temperature": 0},
        }

    async def situate(self, request: SituateRequest) -> Completion:
        try:
            raw = await self._client.messages.with_raw_response.create(**self.request_body(request))
            headers = error_map.rate_limit_headers(raw.headers, "anthropic-ratelimit-")
            message: Message = await raw.parse()
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None
        except anthropic.APIConnectionError as exc:
            raise self._connection_error(exc) from None
        except TypeError as exc:
            # Raised by the SDK before sending when it finds no credential at all.
            if "authentication" not in str(exc):
                raise
            raise ProviderError(
                f"{_NAME}: no API key found; set {KEY_ENV} (or ANTHROPIC_BASE_URL for a local "
                "server)",
                retryable=False,
            ) from None
        except (ValueError, anthropic.APIResponseValidationError) as exc:
            raise self._malformed(f"undecodable body ({type(exc).__name__})") from None
        return self._completion(message, headers)

    def _completion(self, message: Message, headers: dict[str, str]) -> Completion:
        content = getattr(message, "content", None)
        usage = getattr(message, "usage", None)
        if not isinstance(content, list) or usage is None:
            raise self._malformed("no content or usage in the response")
        try:
            text = "".join(
                block.text for block in content if getattr(block, "type", None) == "text"
            )
            billed = Usage(
                input_tokens=int(usage.input_tokens or 0),
                cache_write_tokens=int(usage.cache_creation_input_tokens or 0),
                cache_read_tokens=int(usage.cache_read_input_tokens or 0),
                output_tokens=int(usage.output_tokens or 0),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._malformed(f"unexpected response shape ({type(exc).__name__})") from None
        model = getattr(message, "model", None)
        return Completion(
            text.strip(), billed, model if isinstance(model, str) else self._model, headers
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
            detail=self._clean(str(detail)),
        )

    def _connection_error(self, exc: anthropic.APIConnectionError) -> ProviderError:
        timed_out = isinstance(exc, anthropic.APITimeoutError)
        return error_map.connection_error(
            _NAME, self.base_url, exc, timed_out, self._client.api_key
        )

    def _malformed(self, why: str) -> ProviderError:
        return error_map.malformed(_NAME, why)

    def _clean(self, text: str) -> str:
        return error_map.short(error_map.redact(text, self._client.api_key))

    async def aclose(self) -> None:
        await self._client.close()
