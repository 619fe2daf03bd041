"""Provider failures mapped onto `ProviderError`, one meaning of "retryable" for every provider.

Helpers shared by the Anthropic and OpenAI adapters: HTTP statuses, dropped connections and
timeouts, malformed bodies, retry-after headers, and the redaction that keeps keys out of
messages.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from ctxr.errors import ContextLengthError, ProviderError


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def rate_limit_headers(headers: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The rate-limit headers the queue's limiter reads, lower-cased."""
    keep = (prefix, "retry-after")
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(keep)}


def redact(text: str, secret: str | None) -> str:
    """`text` with any occurrence of the key removed: messages end up in logs and ledgers."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "[redacted]")
    return text


def safe_url(url: object) -> str:
    """A base URL for messages, without any user:password part."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def status_error(
    *,
    name: str,
    key_env: str,
    model: str,
    status: int,
    headers: Mapping[str, str],
    detail: str,
    body: object = None,
) -> ProviderError:
    """Map an HTTP error status to a `ProviderError`: 408, 409, 429 and 5xx (529 included)
    may succeed later; every other 4xx will fail the same way again."""
    retry_after = parse_retry_after(headers)
    if status in (401, 403):
        # The server's words are left out: some echo a part of the key that was sent.
        return ProviderError(
            f"{name} refused the credentials (HTTP {status}); check {key_env}",
            retryable=False,
            status=status,
        )
    if status == 404:
        message = f"{name} does not know model {model!r} (HTTP 404): {detail}"
        return ProviderError(message, retryable=False, status=status)
    if status == 429:
        wait = f", retry after {retry_after:g}s" if retry_after is not None else ""
        message = f"{name} rate limit reached (HTTP 429{wait}): {detail}"
        return ProviderError(message, retryable=True, retry_after=retry_after, status=status)
    if status in (400, 413) and (too_long := context_length(detail, body)) is not None:
        return too_long
    retryable = status in (408, 409) or status >= 500
    kind = "overloaded" if status == 529 else "server error" if status >= 500 else "request error"
    return ProviderError(
        f"{name} {kind} (HTTP {status}): {detail}",
        retryable=retryable,
        retry_after=retry_after if retryable else None,
        status=status,
    )


# What servers say when a request is longer than their window: llama.cpp "request (8588
# tokens) exceeds the available context size (4096 tokens)", vLLM and OpenAI "This model's
# maximum context length is 4096 tokens. However, you requested 5000 tokens", LM Studio "the
# model is loaded with context length of only 4096 tokens".
_CONTEXT_WORDS = re.compile(
    r"context[ _](?:size|length|window)|context_length_exceeded|exceed_context_size", re.I
)
_WINDOW_FIGURES = (
    re.compile(r"available context size \((\d+) tokens\)", re.I),
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"context length of only (\d+)", re.I),
)
_PROMPT_FIGURES = (
    re.compile(r"request \((\d+) tokens\)", re.I),
    re.compile(r"(?:you requested|request has|resulted in) (\d+)", re.I),
)
CONTEXT_SETTINGS = (
    "start the server with a larger window (llama.cpp -c N with fewer --parallel slots, vLLM "
    "--max-model-len, Ollama num_ctx or OLLAMA_CONTEXT_LENGTH, LM Studio's context length), "
    "or set CTXR_LLM_CONTEXT_TOKENS to the window each request has, or lower "
    "CTXR_MAX_DOCUMENT_TOKENS"
)


def context_length(detail: str, body: object = None) -> ContextLengthError | None:
    """A refusal for a request longer than the server's window, with the server's figures
    where it gave them; None for any other refusal."""
    error = body.get("error", body) if isinstance(body, dict) else None
    fields = error if isinstance(error, dict) else {}
    code = " ".join(str(fields.get(k, "")) for k in ("code", "type"))
    if not _CONTEXT_WORDS.search(f"{detail} {code}"):
        return None

    def figure(patterns: tuple[re.Pattern[str], ...], key: str) -> int | None:
        if isinstance(fields.get(key), int):
            return int(fields[key])
        for pattern in patterns:
            if (found := pattern.search(detail)) is not None:
                return int(found.group(1))
        return None

    window = figure(_WINDOW_FIGURES, "n_ctx")
    prompt = figure(_PROMPT_FIGURES, "n_prompt_tokens")
    message = (
        f"the request is longer than the server's context window ({detail}); to fit, "
        f"{CONTEXT_SETTINGS}"
    )
    return ContextLengthError(message, window=window, prompt_tokens=prompt)


def body_message(body: object) -> str | None:
    """`error.message` from an error body, the same place in both providers' formats."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return None


def short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def connection_error(
    name: str,
    base_url: str,
    exc: BaseException,
    timed_out: bool,
    secret: str | None,
    timeout: float | None = None,
) -> ProviderError:
    """A failed connection or a timeout: always worth another try. `timeout`, the client's
    limit in seconds, goes into a timeout's message: a local model slower than the limit
    times out on every request, and the figure says which setting to raise."""
    what = "connection failed"
    if timed_out:
        what = "timed out" if timeout is None else f"timed out after {timeout:g} s"
    cause = exc.__cause__ or exc
    if isinstance(exc, TimeoutError) and not str(exc):  # asyncio's deadline says nothing
        detail = "the whole request (connection, headers and answer) took longer than that"
    else:
        detail = short(redact(str(cause) or type(cause).__name__, secret))
    message = f"{name} {what} at {base_url}: {detail}"
    return ProviderError(message, retryable=True, timed_out=timed_out, connection=True)


def too_large(name: str, base_url: str, exc: BaseException) -> ProviderError:
    """An answer past the size cap (`ctxr.llm.deadline`). Final: the same server asked the
    same question sends the same runaway again, and each one is billed."""
    return ProviderError(f"{name} at {base_url}: {exc}", retryable=False)


def malformed(name: str, why: str) -> ProviderError:
    # Retryable: a proxy or an overloaded server can garble one response; the queue decides
    # how often to try again.
    return ProviderError(f"{name} sent a malformed response: {why}", retryable=True)
