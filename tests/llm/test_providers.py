"""The real Anthropic and OpenAI SDKs against a tiny loopback HTTP server in this file.

The server returns canned responses in order and records each request, so the tests assert
what went over the wire (cache marker placement, temperature, token budget, credentials) and
how responses and failures map onto `Completion` and `ProviderError`. The full-featured fake
(cache emulation, fault injection) lives in tests/fakes/; this one stays minimal on purpose.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ctxr.enrich.situate.prompt import SituateRequest, chunk_part, document_part
from ctxr.errors import ConfigError, ProviderError
from ctxr.llm.anthropic import AnthropicLLM
from ctxr.llm.base import LLM, Completion, Usage
from ctxr.llm.cache_minimums import min_cacheable_tokens
from ctxr.llm.clients import PLACEHOLDER_KEY
from ctxr.llm.error_map import parse_retry_after
from ctxr.llm.openai import OpenAILLM
from ctxr.llm.registry import detect_provider, make_llm

SECRET = "sk-test-secret-value-123456"
REQUEST = SituateRequest("The whole document.", "A chunk.", ("Guide", "Install"), cache=True)

ANTHROPIC_OK: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5-20251001",
    "content": [{"type": "text", "text": " Situated "}, {"type": "text", "text": "here. "}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 31,
        "cache_creation_input_tokens": 4200,
        "cache_read_input_tokens": 0,
        "output_tokens": 17,
    },
}
OPENAI_OK: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": " Ctx. "}, "finish_reason": "stop"}
    ],
    "usage": {
        "prompt_tokens": 1500,
        "completion_tokens": 20,
        "total_tokens": 1520,
        "prompt_tokens_details": {"cached_tokens": 1280},
    },
}


@dataclass
class Canned:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class Loopback:
    """Answers POSTs with the queued `Canned` responses, recording every request."""

    def __init__(self) -> None:
        self.queue: list[Canned] = []
        self.seen: list[Seen] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.seen.append(Seen(self.path, headers, json.loads(raw or b"{}")))
                canned = owner.queue.pop(0) if owner.queue else Canned(500, {"error": "empty"})
                time.sleep(canned.delay)
                body = canned.body if isinstance(canned.body, bytes) else json.dumps(canned.body)
                data = body if isinstance(body, bytes) else body.encode()
                try:
                    self.send_response(canned.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in canned.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture
def server() -> Iterator[Loopback]:
    loopback = Loopback()
    yield loopback
    loopback.close()


def situate(make: Callable[[], LLM], request: SituateRequest = REQUEST) -> Completion:
    async def go() -> Completion:
        llm = make()
        try:
            return await llm.complete(request.completion())
        finally:
            await llm.aclose()

    return asyncio.run(go())


def failure(make: Callable[[], LLM], request: SituateRequest = REQUEST) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        situate(make, request)
    return caught.value


def anthropic_at(server: Loopback, **kwargs: Any) -> Callable[[], LLM]:
    return lambda: AnthropicLLM(api_key=SECRET, base_url=server.url, **kwargs)


def openai_at(server: Loopback, **kwargs: Any) -> Callable[[], LLM]:
    return lambda: OpenAILLM(api_key=SECRET, base_url=server.url + "/v1", **kwargs)


def sent_key(seen: Seen) -> str:
    """The credential a request carried: this SDK sends `Authorization: Bearer`, older ones
    `x-api-key`."""
    return seen.headers.get("x-api-key") or seen.headers["authorization"].removeprefix("Bearer ")


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- Anthropic -------------------------------------------------------------------------------


def test_anthropic_marks_only_the_document_block_and_maps_usage(server: Loopback) -> None:
    server.queue.append(
        Canned(
            body=ANTHROPIC_OK,
            headers={
                "anthropic-ratelimit-requests-remaining": "49",
                "Anthropic-RateLimit-Input-Tokens-Remaining": "39000",
                "x-unrelated": "1",
            },
        )
    )
    done = situate(anthropic_at(server, max_output_tokens=123))
    seen = server.seen[0]
    assert seen.path == "/v1/messages"
    assert sent_key(seen) == SECRET
    body = seen.body
    assert body["model"] == "claude-haiku-4-5"
    assert body["max_tokens"] == 123
    assert body["temperature"] == 0
    assert "cache_control" not in body
    [message] = body["messages"]
    document, chunk = message["content"]
    assert document == {
        "type": "text",
        "text": document_part("The whole document."),
        "cache_control": {"type": "ephemeral"},
    }
    assert chunk == {"type": "text", "text": chunk_part("A chunk.", ("Guide", "Install"))}
    assert "The chunk sits under: Guide > Install" in chunk["text"]
    assert done.text == "Situated here."
    assert done.usage == Usage(31, 4200, 0, 17)
    assert done.model == "claude-haiku-4-5-20251001"
    assert done.rate_limit_headers == {
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
    }


def test_anthropic_sends_no_marker_below_the_cacheable_minimum(server: Loopback) -> None:
    read = {**ANTHROPIC_OK, "usage": {**ANTHROPIC_OK["usage"]}}
    read["usage"].update(cache_creation_input_tokens=None, cache_read_input_tokens=None)
    server.queue.append(Canned(body=read))
    done = situate(anthropic_at(server), SituateRequest("doc", "chunk", cache=False))
    assert "cache_control" not in json.dumps(server.seen[0].body)
    assert done.usage == Usage(31, 0, 0, 17)


def test_anthropic_reads_key_and_base_url_from_the_environment(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    server.queue.append(Canned(body=ANTHROPIC_OK))
    situate(AnthropicLLM)
    assert sent_key(server.seen[0]) == "sk-from-env"


def test_anthropic_base_url_without_a_key_sends_a_placeholder(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.queue.append(Canned(body=ANTHROPIC_OK))
    situate(AnthropicLLM)
    assert sent_key(server.seen[0]) == PLACEHOLDER_KEY


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def test_anthropic_429_is_retryable_with_retry_after(server: Loopback) -> None:
    server.queue.append(Canned(429, _error("rate_limit_error", "slow down"), {"retry-after": "7"}))
    error = failure(anthropic_at(server))
    assert (error.retryable, error.retry_after, error.status) == (True, 7.0, 429)
    assert "slow down" in str(error)


@pytest.mark.parametrize("status", [529, 500, 503])
def test_anthropic_overload_and_server_errors_are_retryable(server: Loopback, status: int) -> None:
    server.queue.append(Canned(status, _error("overloaded_error", "Overloaded")))
    error = failure(anthropic_at(server))
    assert error.retryable and error.status == status
    if status == 529:
        assert "overloaded" in str(error)


def test_anthropic_401_names_the_variable_never_the_key(server: Loopback) -> None:
    server.queue.append(Canned(401, _error("authentication_error", f"bad key {SECRET}")))
    error = failure(anthropic_at(server))
    assert not error.retryable and error.status == 401
    assert "ANTHROPIC_API_KEY" in str(error)
    assert SECRET not in str(error)


@pytest.mark.parametrize("status", [400, 403, 404])
def test_anthropic_client_errors_are_final(server: Loopback, status: int) -> None:
    server.queue.append(Canned(status, _error("invalid_request_error", f"no {SECRET}")))
    error = failure(anthropic_at(server))
    assert not error.retryable and error.status == status
    assert SECRET not in str(error)


def test_anthropic_refused_connection_is_retryable() -> None:
    error = failure(lambda: AnthropicLLM(api_key=SECRET, base_url=refused_url()))
    assert error.retryable and error.status is None
    assert "connection failed" in str(error)


def test_anthropic_timeout_is_retryable(server: Loopback) -> None:
    server.queue.append(Canned(body=ANTHROPIC_OK, delay=1.0))
    error = failure(anthropic_at(server, timeout=0.2))
    assert error.retryable and error.timed_out and "timed out after 0.2 s" in str(error)


def test_anthropic_answer_cut_at_the_budget_is_truncated(server: Loopback) -> None:
    server.queue += [Canned(body={**ANTHROPIC_OK, "stop_reason": "max_tokens"})]
    server.queue += [Canned(body=ANTHROPIC_OK)]
    cut, whole = situate(anthropic_at(server)), situate(anthropic_at(server))
    assert cut.truncated and not whole.truncated


@pytest.mark.parametrize("body", [b"not json at all", {"unexpected": True}])
def test_anthropic_malformed_response_is_retryable(server: Loopback, body: Any) -> None:
    server.queue.append(Canned(body=body))
    error = failure(anthropic_at(server))
    assert error.retryable and "malformed" in str(error)


# --- OpenAI ----------------------------------------------------------------------------------


def test_openai_sends_the_document_as_the_stable_prefix(server: Loopback) -> None:
    server.queue.append(
        Canned(body=OPENAI_OK, headers={"x-ratelimit-remaining-tokens": "9000", "retry-after": "1"})
    )
    done = situate(openai_at(server, max_output_tokens=99))
    seen = server.seen[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert seen.body["temperature"] == 0
    assert seen.body["max_tokens"] == 99
    [message] = seen.body["messages"]
    assert message["role"] == "user"
    assert message["content"].startswith(document_part("The whole document.") + "\n\n")
    assert message["content"].endswith(chunk_part("A chunk.", ("Guide", "Install")))
    assert done.text == "Ctx."
    assert done.usage == Usage(input_tokens=220, cache_read_tokens=1280, output_tokens=20)
    assert done.rate_limit_headers == {"x-ratelimit-remaining-tokens": "9000", "retry-after": "1"}


def test_openai_cache_writes_are_read_where_the_api_reports_them(server: Loopback) -> None:
    # GPT-5.6 and later bill cache writes and report them beside the cached (read) tokens.
    details = {"cached_tokens": 1024, "cache_write_tokens": 300}
    usage = {"prompt_tokens": 1500, "completion_tokens": 20, "prompt_tokens_details": details}
    server.queue.append(Canned(body={**OPENAI_OK, "usage": usage}))
    done = situate(openai_at(server))
    assert done.usage == Usage(
        input_tokens=176, cache_write_tokens=300, cache_read_tokens=1024, output_tokens=20
    )


def test_openai_cache_flag_changes_nothing_on_the_wire(server: Loopback) -> None:
    uncached = {**OPENAI_OK, "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    server.queue += [Canned(body=OPENAI_OK), Canned(body=uncached)]
    situate(openai_at(server))
    done = situate(
        openai_at(server),
        SituateRequest("The whole document.", "A chunk.", REQUEST.heading_path, cache=False),
    )
    assert server.seen[0].body == server.seen[1].body
    assert done.usage == Usage(input_tokens=10, output_tokens=2)


def test_openai_reasoning_models_get_their_own_parameters(server: Loopback) -> None:
    server.queue.append(Canned(body=OPENAI_OK))
    situate(openai_at(server, model="gpt-5-mini"))
    body = server.seen[0].body
    assert body["max_completion_tokens"] == 200 and body["reasoning_effort"] == "minimal"
    assert "temperature" not in body and "max_tokens" not in body


def test_openai_local_server_from_env_needs_no_key(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.queue.append(Canned(body=OPENAI_OK))
    situate(lambda: OpenAILLM(model="llama3.1:8b"))
    assert server.seen[0].headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    assert server.seen[0].body["model"] == "llama3.1:8b"


def test_openai_without_key_or_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAILLM()


def test_openai_errors_map_like_anthropic(server: Loopback) -> None:
    server.queue += [
        Canned(429, {"error": {"message": "Rate limit"}}, {"retry-after-ms": "1500"}),
        Canned(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}}),
        Canned(503, {"error": {"message": "busy"}}),
        Canned(body=b"<html>bad gateway</html>"),
    ]
    limited, denied, busy, garbled = (failure(openai_at(server)) for _ in range(4))
    assert (limited.retryable, limited.retry_after, limited.status) == (True, 1.5, 429)
    assert not denied.retryable and "OPENAI_API_KEY" in str(denied)
    assert SECRET not in str(denied)
    assert busy.retryable and busy.status == 503
    assert garbled.retryable and "malformed" in str(garbled)


def test_openai_refused_connection_is_retryable() -> None:
    error = failure(lambda: OpenAILLM(api_key=SECRET, base_url=refused_url() + "/v1"))
    assert error.retryable and error.status is None


def test_openai_timeout_says_the_limit(server: Loopback) -> None:
    server.queue.append(Canned(body=OPENAI_OK, delay=1.0))
    error = failure(openai_at(server, timeout=0.2))
    assert error.retryable and error.timed_out
    assert "OpenAI timed out after 0.2 s at http://127.0.0.1:" in str(error)


# A chat completion exactly as llama.cpp's server (xllamacpp 2026.10) returned it to ctxr's
# per-chunk prompt, the second chunk of a document: `cached_tokens` is the prompt prefix it
# kept from the first request, and `timings` (cache_n = cached_tokens) is its own extension.
LLAMACPP_OK: dict[str, Any] = {
    "choices": [
        {
            "finish_reason": "length",
            "index": 0,
            "message": {"role": "assistant", "content": "The chunk sits under: Brant pumps"},
        }
    ],
    "created": 1796135770,
    "model": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
    "system_fingerprint": "b0-unknown",
    "object": "chat.completion",
    "usage": {
        "completion_tokens": 40,
        "prompt_tokens": 480,
        "total_tokens": 520,
        "prompt_tokens_details": {"cached_tokens": 463},
    },
    "id": "chatcmpl-wpmSJcOyLwqNhl9ULRLS2S2VmxdyNxu0",
    "timings": {"cache_n": 463, "prompt_n": 17, "prompt_ms": 84.6, "predicted_n": 40},
}


def test_openai_reads_llama_cpp_usage_and_cut_answers(server: Loopback) -> None:
    server.queue.append(Canned(body=LLAMACPP_OK))
    done = situate(openai_at(server, model="smollm2"))
    assert done.usage == Usage(input_tokens=17, cache_read_tokens=463, output_tokens=40)
    assert done.truncated  # finish_reason "length": stopped at max_tokens
    assert done.model == "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


# --- choosing a provider ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"ANTHROPIC_API_KEY": "k"}, "anthropic"),
        ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "anthropic"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "openai"),
        ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "anthropic"),
        ({"OPENAI_API_KEY": "k", "CTXR_LLM_PROVIDER": "OpenAI"}, "openai"),
        ({"CTXR_LLM_PROVIDER": "anthropic"}, "anthropic"),
        ({"ANTHROPIC_AUTH_TOKEN": "t"}, "anthropic"),
        ({"ANTHROPIC_API_KEY": ""}, None),
    ],
)
def test_detect_provider(env: dict[str, str], expected: str | None) -> None:
    assert detect_provider(env) == expected


def test_detect_provider_rejects_an_unknown_name() -> None:
    with pytest.raises(ConfigError, match="CTXR_LLM_PROVIDER"):
        detect_provider({"CTXR_LLM_PROVIDER": "cohere"})


def test_make_llm_builds_each_provider_with_its_default_model() -> None:
    anthropic_llm: LLM = make_llm("anthropic", api_key=SECRET)
    openai_llm: LLM = make_llm("openai", "gpt-4.1-mini", api_key=SECRET)
    assert (anthropic_llm.provider, anthropic_llm.model) == ("anthropic", "claude-haiku-4-5")
    assert (openai_llm.provider, openai_llm.model) == ("openai", "gpt-4.1-mini")
    assert anthropic_llm.min_cacheable_tokens == 4096
    assert openai_llm.min_cacheable_tokens == 1024
    with pytest.raises(ConfigError, match="unknown LLM provider"):
        make_llm("cohere")


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-3-5-haiku-latest", 2048),
        ("claude-3-haiku-20240307", 2048),
        ("claude-sonnet-4-5", 1024),
        ("claude-sonnet-4-0", 1024),
        ("claude-opus-4-5", 4096),
        ("claude-some-future-model", 4096),
    ],
)
def test_anthropic_minimum_cacheable_sizes(model: str, tokens: int) -> None:
    assert min_cacheable_tokens("anthropic", model) == tokens


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now) == 30.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_anthropic_without_any_credential_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # No profile files either: the SDK also looks for credentials under the home directory.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    error = failure(lambda: AnthropicLLM(timeout=2))
    assert not error.retryable and "ANTHROPIC_API_KEY" in str(error)
