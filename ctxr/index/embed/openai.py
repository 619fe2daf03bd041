"""`OpenAIEmbedder`: dense vectors from OpenAI's ``/v1/embeddings``, or any compatible server.

The same client works against vLLM, Ollama, llama.cpp or a hosted gateway through
``OPENAI_BASE_URL`` (a base URL without a key gets a placeholder key, as `OpenAILLM` does).
Requests are sent as the LLM calls are: the SDK's own retries are off, tenacity retries what
may succeed later (429, 5xx, timeouts, dropped connections) with exponential backoff and full
jitter, never sooner than a ``retry-after`` (a server asking for more than `max_retry_wait`,
60 s by default, is not waited for: the embedding fails at once and says what was asked);
errors are mapped onto `ProviderError` by the
providers' shared helpers, so "retryable" means the same thing here, and what finally fails
is raised as `EmbedderError`.

Texts are counted with tiktoken's ``cl100k_base`` (the encoding of OpenAI's embedding models;
for another server's model the counts are an estimate) and cut to `max_tokens` before they
are sent. Requests carry at most `batch_size` texts and a token budget (OpenAI's 300,000 per
request, and never more than a minute's `tokens_per_minute`). Client-side limits go through
`SyncRateLimiter` (the queue's `RateLimiter` waits with asyncio; the indexer is sync).

The vector size is known up front for OpenAI's models or from `dimensions`; for any other
model the first use of `dim` sends one one-text request to find out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import numpy as np
import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from ctxr.errors import ConfigError, EmbedderError, ProviderError
from ctxr.index.embed.base import FloatMatrix
from ctxr.llm import clients, error_map
from ctxr.llm.ratelimit import SyncRateLimiter
from ctxr.tokens import get_encoding

__all__ = ["DEFAULT_MODEL", "KNOWN_DIMS", "OpenAIEmbedder"]

DEFAULT_MODEL: Final = "text-embedding-3-small"
KNOWN_DIMS: Final[Mapping[str, int]] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# The API reference: at most 2,048 inputs and 300,000 tokens (summed) per request.
MAX_INPUTS: Final = 2048
MAX_REQUEST_TOKENS: Final = 300_000
ENCODING: Final = "cl100k_base"
KEY_ENV: Final = "OPENAI_API_KEY"
_NAME = "OpenAI embeddings"
_PROBE_TEXT = "dimension probe"


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


class OpenAIEmbedder:
    """Implements `ctxr.index.embed.base.Embedder` structurally; sync and thread-safe."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 128,
        max_tokens: int = 8191,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        timeout: float = 60.0,
        max_attempts: int = 6,
        *,
        max_request_tokens: int = MAX_REQUEST_TOKENS,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        max_retry_wait: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= batch_size <= MAX_INPUTS:
            raise ConfigError(f"embedding batch_size must be 1 to {MAX_INPUTS}, got {batch_size}")
        if max_tokens < 1 or max_request_tokens < max_tokens:
            raise ConfigError(
                f"embedding max_tokens must be 1 to max_request_tokens ({max_request_tokens}), "
                f"got {max_tokens}"
            )
        if dimensions is not None and dimensions < 1:
            raise ConfigError(f"CTXR_EMBEDDING_DIMENSIONS must be positive, got {dimensions}")
        if max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, got {max_attempts}")
        self._client = clients.openai_client(
            sync=True,
            name=_NAME,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            hint=", or use CTXR_EMBEDDER=local",
        )
        self._model, self._dimensions = model, dimensions
        self._dim: int | None = dimensions or KNOWN_DIMS.get(model)
        self._batch_size, self._max_tokens = batch_size, max_tokens
        budget = max_request_tokens
        if tokens_per_minute:  # a request over the whole minute's allowance is refused for good
            budget = max(max_tokens, min(budget, int(tokens_per_minute)))
        self._request_tokens = budget
        self._max_attempts = max_attempts
        self._wait_exponential = wait_random_exponential(
            multiplier=backoff_initial, max=backoff_max
        )
        self._sleep = sleep
        self._max_retry_wait = max_retry_wait
        self.limiter = SyncRateLimiter(
            requests_per_minute, tokens_per_minute, clock=clock, sleep=sleep
        )
        self._lock = threading.Lock()
        self.requests_sent = 0  # attempts, retries included
        self.tokens_billed = 0

    @property
    def name(self) -> str:
        """Model and size, so vectors of two models (or two sizes of one) never mix."""
        return f"openai:{self._model}" + (f"@{self._dimensions}" if self._dimensions else "")

    @property
    def model(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        return error_map.safe_url(self._client.base_url)

    @property
    def dim(self) -> int:
        if self._dim is None:
            with self._lock:
                if self._dim is None:
                    self._send([_PROBE_TEXT], self.count_tokens(_PROBE_TEXT))  # sets _dim
        assert self._dim is not None
        return self._dim

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text``, not truncated, so a splitter can size chunks to `max_tokens`."""
        return len(get_encoding(ENCODING).encode(text, disallowed_special=()))

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if isinstance(texts, str):  # a bare string would be embedded one character at a time
            raise TypeError("embed() takes a sequence of strings, not a single string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        fitted = [self._fit(text) for text in texts]
        rows = [self._send(batch, tokens) for batch, tokens in self._batches(fitted)]
        matrix = np.concatenate(rows).astype(np.float32, copy=False)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # OpenAI's vectors are unit length already; a compatible server's need not be.
        unit: FloatMatrix = (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit

    def close(self) -> None:
        self._client.close()

    def _fit(self, text: str) -> tuple[str, int]:
        """``text`` cut to `max_tokens` (by tokens), and its token count."""
        encoding = get_encoding(ENCODING)
        ids = encoding.encode(text, disallowed_special=())
        limit = self._max_tokens
        while len(ids) > self._max_tokens and limit > 0:
            # A cut can split a character; re-encoding the decoded prefix can then come out a
            # token longer, so cut again until it fits.
            text = encoding.decode(ids[:limit])
            ids, limit = encoding.encode(text, disallowed_special=()), limit - 1
        # The API refuses an empty string; a space embeds as "nothing" all the same.
        return (text, len(ids)) if text else (" ", 1)

    def _batches(self, fitted: list[tuple[str, int]]) -> Iterator[tuple[list[str], int]]:
        batch: list[str] = []
        tokens = 0
        for text, n in fitted:
            if batch and (len(batch) >= self._batch_size or tokens + n > self._request_tokens):
                yield batch, tokens
                batch, tokens = [], 0
            batch.append(text)
            tokens += n
        if batch:
            yield batch, tokens

    def _send(self, texts: list[str], tokens: int) -> FloatMatrix:
        retrying = Retrying(
            stop=stop_after_attempt(self._max_attempts),
            wait=self._wait,
            retry=retry_if_exception(_retryable),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, texts, tokens)
        except ProviderError as exc:
            where = f"{self._model!r} at {self.base_url}"
            if exc.retryable:
                raise EmbedderError(
                    f"embedding with {where} failed {self._max_attempts} times; the last "
                    f"error: {exc}. Try again later (cached vectors are kept), or lower "
                    "CTXR_EMBEDDING_REQUESTS_PER_MINUTE / CTXR_EMBEDDING_TOKENS_PER_MINUTE"
                ) from None
            hint = (
                ""
                if exc.status in (401, 403)
                else ("; check CTXR_EMBEDDING_MODEL and CTXR_EMBEDDING_DIMENSIONS")
            )
            raise EmbedderError(f"cannot embed with {where}: {exc}{hint}") from None

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        floor = exc.retry_after if isinstance(exc, ProviderError) and exc.retry_after else 0.0
        return min(max(float(self._wait_exponential(state)), floor), self._max_retry_wait)

    def _attempt(self, texts: list[str], tokens: int) -> FloatMatrix:
        self.limiter.acquire(tokens)
        self.requests_sent += 1
        body: dict[str, Any] = {"model": self._model, "input": texts}
        if self._dimensions:
            body["dimensions"] = self._dimensions
        try:
            raw = self._client.embeddings.with_raw_response.create(**body)
            headers = error_map.rate_limit_headers(raw.headers, "x-ratelimit-")
            response = raw.parse()  # the SDK's parser decodes the base64 vectors it asked for
        except openai.APIStatusError as exc:
            self.limiter.settle(tokens, 0)
            error = self._status_error(exc)
            if error.retry_after and error.retry_after > self._max_retry_wait:
                # A quota or an outage: no wait inside a run repairs it, and an hour's silent
                # wait looks like a hang.
                raise ProviderError(
                    f"{error} (asked to wait {error.retry_after:g} s, longer than the "
                    f"{self._max_retry_wait:g} s ctxr waits: try again later)",
                    retryable=False,
                    status=error.status,
                ) from None
            if error.retry_after:
                self.limiter.pause(error.retry_after)  # later batches wait too
            raise error from None
        except openai.APIConnectionError as exc:
            self.limiter.settle(tokens, 0)
            what = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
            cause = exc.__cause__ or exc
            detail = self._clean(str(cause) or type(cause).__name__)
            message = f"{_NAME} {what} at {self.base_url}: {detail}"
            raise ProviderError(message, retryable=True) from None
        except (ValueError, openai.APIResponseValidationError) as exc:
            self.limiter.settle(tokens, 0)
            raise self._malformed(f"undecodable body ({type(exc).__name__})") from None
        self.limiter.observe(headers)
        matrix = self._matrix(response, len(texts))
        usage = getattr(response, "usage", None)
        billed = int(getattr(usage, "prompt_tokens", None) or tokens)
        self.limiter.settle(tokens, billed)
        self.tokens_billed += billed
        return matrix

    def _matrix(self, response: Any, n: int) -> FloatMatrix:
        """The response's vectors in input order (by their ``index``), checked for size."""
        try:
            items = sorted(response.data, key=lambda item: int(item.index))
            if [int(item.index) for item in items] != list(range(n)):
                raise ValueError(f"{len(items)} vectors for {n} inputs")
            matrix = np.asarray([item.embedding for item in items], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._malformed(f"unexpected response shape ({exc})") from None
        if matrix.ndim != 2 or not np.isfinite(matrix).all():
            raise self._malformed("vectors of uneven length or not finite")
        width = int(matrix.shape[1])
        if self._dim is None:
            self._dim = width
        elif width != self._dim:
            raise EmbedderError(
                f"{_NAME}: {self._model!r} at {self.base_url} returned {width}-dimensional "
                f"vectors, expected {self._dim}; set CTXR_EMBEDDING_DIMENSIONS to match the model"
            )
        return matrix

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

    def _malformed(self, why: str) -> ProviderError:
        return error_map.malformed(_NAME, why)

    def _clean(self, text: str) -> str:
        return error_map.short(error_map.redact(text, self._client.api_key))
