"""One HTTP request of the fake LLM server: route, rate limit, fault, answer, record."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from . import llm_window
from .llm_batches import BATCH_PATHS
from .llm_cache import AnthropicPlan, OpenAIPlan
from .llm_embeddings import embed
from .llm_faults import Admission, Tokens, format_duration, format_retry_after, latency_for
from .llm_rerank import rerank
from .llm_wire import (
    BadRequest,
    Provider,
    anthropic_message,
    count_request_tokens,
    count_text_tokens,
    error_body,
    forced_tool,
    min_cacheable_tokens,
    openai_completion,
    prompt_parts,
    truncate_to_tokens,
)

if TYPE_CHECKING:
    from .llm_server import FakeLLMServer, RecordedRequest

ROUTES: dict[str, tuple[str, Provider]] = {
    "/v1/messages": ("messages", "anthropic"),
    "/v1/messages/count_tokens": ("count_tokens", "anthropic"),
    "/v1/chat/completions": ("chat.completions", "openai"),
    "/v1/embeddings": ("embeddings", "openai"),
    "/v1/rerank": ("rerank", "openai"),  # Cohere's shape; errors in OpenAI's
}
_REASONS = {529: "Overloaded"}


def _send(
    h: BaseHTTPRequestHandler,
    provider: Provider,
    status: int,
    payload: bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    request_id = ("req_" if provider == "anthropic" else "") + uuid.uuid4().hex[:24]
    try:
        h.send_response(status, _REASONS.get(status))
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(payload)))
        h.send_header("request-id" if provider == "anthropic" else "x-request-id", request_id)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(payload)
    except OSError:  # the client gave up (a "slow" answer after its timeout)
        h.close_connection = True


def _error(
    h: BaseHTTPRequestHandler,
    fake: FakeLLMServer,
    record: RecordedRequest,
    kind: str,
    message: str | None = None,
    headers: Mapping[str, str] | None = None,
    fault: str | None = None,
) -> None:
    status, payload = error_body(kind, record.provider, message)
    # Recorded before the bytes go out: a client that has its answer sees the ledger complete.
    fake._finish(record, status, fault)
    _send(h, record.provider, status, payload, headers)


def _rfc3339_in(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


def _rate_headers(provider: Provider, admission: Admission | None) -> dict[str, str]:
    """The provider's request rate-limit headers (sent only when an rpm limit is set)."""
    if admission is None:
        return {}
    if provider == "anthropic":
        return {
            "anthropic-ratelimit-requests-limit": str(admission.limit),
            "anthropic-ratelimit-requests-remaining": str(admission.remaining),
            "anthropic-ratelimit-requests-reset": _rfc3339_in(admission.reset_s),
        }
    return {
        "x-ratelimit-limit-requests": str(admission.limit),
        "x-ratelimit-remaining-requests": str(admission.remaining),
        "x-ratelimit-reset-requests": format_duration(admission.reset_s),
    }


def _rate_limited_headers(provider: Provider, retry_after_s: float) -> dict[str, str]:
    """An injected 429's headers: retry-after and 'no requests left until then'."""
    headers = {"retry-after": format_retry_after(retry_after_s)}
    if provider == "anthropic":
        headers["anthropic-ratelimit-requests-remaining"] = "0"
        headers["anthropic-ratelimit-requests-reset"] = _rfc3339_in(retry_after_s)
    else:
        headers["x-ratelimit-remaining-requests"] = "0"
        headers["x-ratelimit-reset-requests"] = format_duration(retry_after_s)
    return headers


def _refused_key(h: BaseHTTPRequestHandler, fake: FakeLLMServer) -> str | None:
    """The 401 message for a request without the server's key; None when it may pass."""
    sent = h.headers.get("x-api-key") or h.headers.get("authorization", "").removeprefix("Bearer ")
    if fake.api_key is None or sent == fake.api_key:
        return None
    shown = f"{sent[:3]}*****{sent[-4:]}" if len(sent) > 8 else "*****"
    return f"Incorrect API key provided: {shown}."


def handle_post(h: BaseHTTPRequestHandler, fake: FakeLLMServer) -> None:
    length = int(h.headers.get("content-length") or 0)
    raw = h.rfile.read(length) if length else b""
    path = h.path.split("?", 1)[0].rstrip("/")
    guess: Provider = "anthropic" if path.startswith("/v1/messages") else "openai"
    if fake.batch_api and path.startswith(BATCH_PATHS):  # not recorded as requests
        refused = _refused_key(h, fake)
        if refused is not None:
            status, payload = error_body("401", guess, refused)
        else:
            ctype = h.headers.get("content-type", "")
            status, payload = fake.batches.handle(h.command, path, raw, ctype)
        _send(h, guess, status, payload)
        return
    route = ROUTES.get(path) if h.command == "POST" else None
    endpoint, provider = route or (path, guess)
    record, body = fake._arrive(endpoint, provider, raw)
    said = llm_window.info(fake.server_kind, h.command, path, body, fake.context_window,
                           fake.output_limit)  # fmt: skip
    if said is not None:  # where a local server says its window (fakes.llm_window)
        fake._finish(record, said[0], None)
        _send(h, provider, *said)
        return
    if route is None:
        _error(h, fake, record, "404", f"{h.command} {path}: no such endpoint in the fake")
        return
    if (refused := _refused_key(h, fake)) is not None:
        _error(h, fake, record, "401", refused)
        return
    if endpoint in ("messages", "chat.completions"):
        fake._await_company()  # `gather`: held until enough are in flight at once
    admission, fault = fake._admit(record)
    if admission is not None and not admission.allowed:
        headers = {
            **_rate_headers(provider, admission),
            "retry-after": format_retry_after(admission.retry_after_s),
        }
        message = f"Rate limit of {admission.limit} requests per minute exceeded"
        _error(h, fake, record, "429", message, headers, "rate_limit")
        return
    kind = fault.kind if fault else None
    if fault is not None and fault.kind in ("429", "529", "500"):
        extra = _rate_limited_headers(provider, fault.retry_after_s) if kind == "429" else None
        _error(h, fake, record, fault.kind, None, extra, kind)
        return
    if kind == "drop":
        h.close_connection = True
        with contextlib.suppress(OSError):
            h.connection.shutdown(socket.SHUT_RDWR)
        fake._finish(record, None, kind)
        return
    if kind in ("malformed", "wrong_shape"):
        payload = b'{"id": "msg_01", "type": "mess' if kind == "malformed" else b'{"result": []}'
        fake._finish(record, 200, kind)
        _send(h, provider, 200, payload)
        return
    if fault is not None and kind == "drip":
        _drip(h, fake, record, fault.delay_s)
        return
    if kind == "huge" and endpoint in ("messages", "chat.completions"):
        fake._finish(record, 200, kind)
        _send(h, provider, 200, _huge(provider, body, fake.huge_bytes))
        return
    if fault is not None and kind == "slow":
        fake._sleep(fault.delay_s)
    if not isinstance(body, dict):
        _error(h, fake, record, "400", "the request body must be a JSON object", fault=kind)
        return
    if endpoint == "chat.completions" and fake.context_window is not None:
        prompt = count_request_tokens(body, provider)
        answer = body.get("max_tokens", body.get("max_completion_tokens"))
        asked = prompt + (answer if isinstance(answer, int) else 0)
        if (asked if fake.window_counts_output else prompt) > fake.context_window:
            fake._finish(record, 400, "context_length")
            too_long = llm_window.refusal(fake.server_kind, prompt, asked, fake.context_window)
            _send(h, provider, 400, too_long)
            return
    try:
        if endpoint == "count_tokens":
            payload = json.dumps({"input_tokens": count_request_tokens(body, "anthropic")}).encode()
        elif endpoint == "embeddings":
            payload = embed(fake, body, record)
        elif endpoint == "rerank":
            payload = rerank(fake, body, record)
        else:
            payload = generate(fake, provider, body, record)
    except BadRequest as exc:
        _error(h, fake, record, "400", str(exc), fault=kind)
        return
    except Exception as exc:  # a bug, or a test's `respond` raising: answer, don't hang
        _error(h, fake, record, "500", f"fake server error: {exc!r}", fault=kind)
        return
    fake._finish(record, 200, kind)
    _send(h, provider, 200, payload, _rate_headers(provider, admission))


def _drip(
    h: BaseHTTPRequestHandler, fake: FakeLLMServer, record: RecordedRequest, seconds: float
) -> None:
    """200, a Content-Length far beyond what is sent, then one byte at a time: every read
    returns within any per-read timeout, so only a deadline on the whole request ends it."""
    fake._finish(record, 200, "drip")
    h.close_connection = True
    try:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", "1000000")
        h.end_headers()
        h.wfile.write(b"{")
        h.wfile.flush()
        end = time.monotonic() + seconds
        while time.monotonic() < end and not fake._stopping.is_set():
            fake._sleep(fake.drip_interval_s)
            h.wfile.write(b" ")
            h.wfile.flush()
    except OSError:  # the client gave up: what a deadline is for
        pass


def _huge(provider: Provider, body: Any, size: int) -> bytes:
    """A well-formed answer of `size` characters of text, whatever the output budget said."""
    model = str(body.get("model", "model")) if isinstance(body, dict) else "model"
    text = ("lorem ipsum " * (size // 12 + 1))[:size]
    if provider == "anthropic":
        usage = {"input_tokens": 10, "output_tokens": size // 4}
        return json.dumps(anthropic_message(model, text, usage, False)).encode()
    usage = {"prompt_tokens": 10, "completion_tokens": size // 4, "total_tokens": 10 + size // 4}
    return json.dumps(openai_completion(model, text, usage, False)).encode()


def generate(fake: FakeLLMServer, provider: Provider, body: Any, record: RecordedRequest) -> bytes:
    """The 200 body of a generation request; raises `BadRequest`."""
    parts = prompt_parts(body, provider)
    if body.get("stream"):
        raise BadRequest("stream: the fake server does not stream; send stream=false")
    key = "max_tokens" if provider == "anthropic" else "max_completion_tokens"
    limit = body.get(key, body.get("max_tokens"))
    if provider == "anthropic" and not isinstance(limit, int):
        raise BadRequest("max_tokens: field required")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise BadRequest(f"{key}: must be a positive integer")
    model = str(body["model"])
    if provider == "openai" and fake.refuse_schemas and body.get("response_format"):
        raise BadRequest("response_format: this server does not support structured outputs")
    tool = forced_tool(body) if provider == "anthropic" else None
    plan: AnthropicPlan | OpenAIPlan
    with fake._lock:
        if provider == "anthropic":
            minimum = min_cacheable_tokens(model, fake.min_cacheable)
            plan = fake.anthropic_cache.plan(model, parts, minimum)
        else:
            plan = fake.openai_cache.plan(model, parts)
    text, cut = truncate_to_tokens(str(fake.respond(body)), limit or 1_000_000, model)
    output = count_text_tokens(text, model)
    if isinstance(plan, AnthropicPlan):
        tokens = Tokens(
            plan.input_tokens,
            plan.cache_creation_input_tokens,
            plan.cache_read_input_tokens,
            output,
        )
    else:
        tokens = Tokens(plan.prompt_tokens - plan.cached_tokens, 0, plan.cached_tokens, output)
    fake._sleep(latency_for(fake.latency, tokens))
    with fake._lock:  # the response completes: only now do its writes become readable
        if isinstance(plan, AnthropicPlan):
            fake.anthropic_cache.commit(plan)
            usage = plan.usage(output)
            record.cache_writes = [w.prefix_hash for w in plan.writes]
            record.cache_read = plan.read_hash
        else:
            fake.openai_cache.commit(plan)
            usage = plan.usage(output)
        record.usage, record.text = usage, text
    if provider == "anthropic":
        return json.dumps(anthropic_message(model, text, usage, cut, tool)).encode()
    return json.dumps(openai_completion(model, text, usage, cut)).encode()
