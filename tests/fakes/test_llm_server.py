"""The fake LLM server itself, driven by the real anthropic and openai SDKs over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anthropic
import openai
import pytest

from ctxr.tokens import get_encoding
from tests.fakes.llm_cache import AnthropicPromptCache
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.llm_wire import (
    PromptPart,
    count_request_tokens,
    count_text_tokens,
    min_cacheable_tokens,
)

T = TypeVar("T")
SONNET, HAIKU = "claude-sonnet-4-6", "claude-haiku-4-5"
DOC = "# Widget handbook\n" + "".join(
    f"Widget {i} connects to the bus and reports its state every {i % 7 + 1} seconds. "
    for i in range(160)
)  # ~2,700 cl100k tokens: above Sonnet's 1,024 minimum, below Haiku 4.5's 4,096


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def situate(
    doc: str = DOC, chunk: str = "Widget 3 connects to the bus", **kw: Any
) -> dict[str, Any]:
    """An Anthropic request shaped like the queue's: the document block carries the marker."""
    return {
        "model": kw.pop("model", SONNET),
        "max_tokens": kw.pop("max_tokens", 100),
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": f"<document>\n{doc}\n</document>",
                        "cache_control": {"type": "ephemeral"},
                    },
                    {"type": "text", "text": f"<chunk>\n{chunk}\n</chunk>\nSituate the chunk."},
                ],
            }
        ],
        **kw,
    }


def split_tokens(body: dict[str, Any]) -> tuple[int, int]:
    """(document-block tokens, tokens after it), by the fake's documented counting rule."""
    blocks = body["messages"][0]["content"]
    return count_text_tokens(blocks[0]["text"], body["model"]), count_text_tokens(
        blocks[1]["text"], body["model"]
    )


async def with_anthropic(
    server: FakeLLMServer, fn: Callable[[anthropic.AsyncAnthropic], Awaitable[T]], **kw: Any
) -> T:
    client = server.anthropic_client(**kw)
    try:
        return await fn(client)
    finally:
        await client.close()


@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as s:
        yield s


def test_anthropic_first_request_writes_the_document_then_reads_it(server: FakeLLMServer) -> None:
    async def go(c: anthropic.AsyncAnthropic) -> list[anthropic.types.Message]:
        return [await c.messages.create(**situate(chunk=f"chunk {i}")) for i in range(2)]

    first, second = run(with_anthropic(server, go))
    doc_tokens, rest = split_tokens(situate(chunk="chunk 0"))
    assert first.usage.cache_creation_input_tokens == doc_tokens > 1024
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.input_tokens == rest
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == doc_tokens
    assert second.usage.cache_read_input_tokens == doc_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert first.content[0].type == "text"
    assert first.content[0].text == "This chunk is from Widget handbook and covers chunk 0."
    assert first.usage.output_tokens == count_text_tokens(first.content[0].text, SONNET)
    assert first.stop_reason == "end_turn"
    assert len(server.cache_writes_by_prefix()) == 1
    assert list(server.cache_writes_by_prefix().values()) == [1]
    assert [r.status for r in server.requests] == [200, 200]
    assert server.requests[1].cache_read == server.requests[0].cache_writes[0]


def test_count_tokens_matches_the_public_rule(server: FakeLLMServer) -> None:
    body = situate(system="You write contexts.")

    async def go(c: anthropic.AsyncAnthropic) -> int:
        counted = await c.messages.count_tokens(
            model=body["model"], system=body["system"], messages=body["messages"]
        )
        return counted.input_tokens

    assert run(with_anthropic(server, go)) == count_request_tokens(body, "anthropic")
    assert sum(split_tokens(body)) + count_text_tokens("You write contexts.", SONNET) == (
        count_request_tokens(body, "anthropic")
    )
    assert server.requests[0].endpoint == "count_tokens"


def test_a_forced_tool_call_bills_the_tool_use_system_prompt(server: FakeLLMServer) -> None:
    tool = {"name": "answer", "description": "The answer.", "input_schema": {"type": "object"}}
    plain = situate(doc="A small note.")
    choice = {"type": "tool", "name": "answer"}
    forced = situate(doc="A small note.", tools=[tool], tool_choice=choice)

    async def go(c: anthropic.AsyncAnthropic) -> list[int]:
        return [(await c.messages.create(**b)).usage.input_tokens for b in (plain, forced)]

    without, with_tool = run(with_anthropic(server, go))
    tool_text = json.dumps([tool], ensure_ascii=False, sort_keys=True)
    # Anthropic's table: 313 tokens for "any"/"tool" on Claude 4 models, plus the tool's JSON.
    assert with_tool - without == 313 + count_text_tokens(tool_text, SONNET)


def test_concurrent_first_requests_all_write_and_a_later_one_reads() -> None:
    # Held until all three are in flight: none can finish (and write) before the others arrive.
    with FakeLLMServer(latency=0.3, gather=3) as server:

        async def go(c: anthropic.AsyncAnthropic) -> list[anthropic.types.Message]:
            burst = await asyncio.gather(
                *(c.messages.create(**situate(chunk=f"c{i}")) for i in range(3))
            )
            return [*burst, await c.messages.create(**situate(chunk="late"))]

        messages = run(with_anthropic(server, go))
        writes = [m.usage.cache_creation_input_tokens or 0 for m in messages]
        assert [w > 0 for w in writes] == [True, True, True, False]
        assert (messages[3].usage.cache_read_input_tokens or 0) > 0
        assert list(server.cache_writes_by_prefix().values()) == [3]
        assert server.peak_in_flight == 3


def test_first_then_concurrent_rest_writes_once() -> None:
    with FakeLLMServer(latency=0.1) as server:

        async def go(c: anthropic.AsyncAnthropic) -> list[anthropic.types.Message]:
            first = await c.messages.create(**situate(chunk="c0"))
            server.hold_until(9)  # the peak is then the client's concurrency, not the load's
            rest = await asyncio.gather(
                *(c.messages.create(**situate(chunk=f"c{i}")) for i in range(1, 32))
            )
            return [first, *rest]

        messages = run(with_anthropic(server, go))
        assert sum((m.usage.cache_read_input_tokens or 0) > 0 for m in messages) == 31
        assert list(server.cache_writes_by_prefix().values()) == [1]
        assert server.peak_in_flight > 8  # the connections really overlapped


def test_below_minimum_is_not_cached_and_the_table_is_overridable() -> None:
    assert min_cacheable_tokens("claude-haiku-4-5-20251001") == 4096
    assert min_cacheable_tokens("claude-3-5-haiku-latest") == 2048
    assert min_cacheable_tokens("claude-sonnet-4-6") == 1024
    assert min_cacheable_tokens("claude-opus-5-5") == 512
    body = situate(model=HAIKU)
    with FakeLLMServer() as server:

        async def go(c: anthropic.AsyncAnthropic) -> list[anthropic.types.Usage]:
            return [(await c.messages.create(**body)).usage for _ in range(2)]

        for usage in run(with_anthropic(server, go)):
            assert usage.cache_creation_input_tokens == 0
            assert usage.cache_read_input_tokens == 0
            assert usage.input_tokens == count_request_tokens(body, "anthropic")
        assert server.cache_writes_by_prefix() == {}
    with FakeLLMServer(min_cacheable={"claude-haiku": 1024}) as server:
        usage = run(with_anthropic(server, lambda c: c.messages.create(**body))).usage
        assert usage.cache_creation_input_tokens == split_tokens(body)[0]


def test_ttl_expires_and_reads_refresh_it() -> None:
    with FakeLLMServer(cache_ttl_s=300) as server:

        async def go(c: anthropic.AsyncAnthropic) -> list[int]:
            writes = []
            for step in (0, 200, 200, 301):  # write, read (refresh), read, expired: write
                server.advance(step)
                usage = (await c.messages.create(**situate())).usage
                writes.append(usage.cache_creation_input_tokens or 0)
            return writes

        writes = run(with_anthropic(server, go))
        assert [w > 0 for w in writes] == [True, False, False, True]
    with FakeLLMServer(cache_ttl_s=0.2) as server:  # and the real clock

        async def real(c: anthropic.AsyncAnthropic) -> bool:
            await c.messages.create(**situate())
            await asyncio.sleep(0.3)
            usage = (await c.messages.create(**situate())).usage
            return (usage.cache_creation_input_tokens or 0) > 0

        assert run(with_anthropic(server, real))


def test_top_level_cache_control_marks_the_last_block(server: FakeLLMServer) -> None:
    body = situate()
    del body["messages"][0]["content"][0]["cache_control"]
    body["cache_control"] = {"type": "ephemeral"}
    usage = run(with_anthropic(server, lambda c: c.messages.create(**body))).usage
    assert usage.cache_creation_input_tokens == sum(split_tokens(body))
    assert usage.input_tokens == 0


def test_openai_prefix_cache_rule(server: FakeLLMServer) -> None:
    def chat(chunk: str, model: str = "gpt-4o-mini") -> dict[str, Any]:
        return {
            "model": model,
            "max_completion_tokens": 60,
            "messages": [
                {"role": "system", "content": "You write short contexts."},
                {"role": "user", "content": f"{DOC}\n\nChunk: {chunk}"},
            ],
        }

    async def go() -> list[openai.types.chat.ChatCompletion]:
        client = server.openai_client()
        try:
            out = [await client.chat.completions.create(**chat("a"))]
            out.append(await client.chat.completions.create(**chat("b")))
            out.append(await client.chat.completions.create(**chat("b", "gpt-3.5-turbo")))
            short = {**chat("c"), "messages": [{"role": "user", "content": "hi"}]}
            out.append(await client.chat.completions.create(**short))
            return out
        finally:
            await client.close()

    first, second, other_model, short = run(go())
    o200k = get_encoding("o200k_base")
    ids = [
        o200k.encode("You write short contexts.") + o200k.encode(f"{DOC}\n\nChunk: {c}")
        for c in "ab"
    ]
    shared = next(i for i, (x, y) in enumerate(zip(*ids, strict=False)) if x != y)
    assert shared > 1024
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens == len(ids[1]) == count_request_tokens(chat("b"), "openai")
    assert second.usage.prompt_tokens_details.cached_tokens == 1024 + (shared - 1024) // 128 * 128
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert other_model.usage is not None and other_model.usage.prompt_tokens_details is not None
    assert other_model.usage.prompt_tokens_details.cached_tokens == 0  # caches are per model
    assert short.usage is not None and short.usage.prompt_tokens_details is not None
    assert short.usage.prompt_tokens_details.cached_tokens == 0
    assert first.choices[0].finish_reason == "stop"
    assert first.choices[0].message.content == (
        "This chunk is from Widget handbook and covers # Widget handbook Widget 0 connects to the."
    )
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    assert server.count("chat.completions", 200) == 4


def test_respond_callable_and_max_tokens_truncation() -> None:
    replies = iter(["", "word " * 500])
    with FakeLLMServer(respond=lambda body: next(replies)) as server:

        async def go(c: anthropic.AsyncAnthropic) -> list[anthropic.types.Message]:
            return [await c.messages.create(**situate(max_tokens=50)) for _ in range(2)]

        empty, huge = run(with_anthropic(server, go))
        assert empty.content[0].type == "text" and empty.content[0].text == ""
        assert empty.usage.output_tokens == 0
        assert huge.usage.output_tokens == 50 and huge.stop_reason == "max_tokens"


def _anthropic_error(server: FakeLLMServer, **client_kw: Any) -> BaseException:
    async def go(c: anthropic.AsyncAnthropic) -> BaseException:
        with pytest.raises(Exception) as info:
            await c.messages.create(**situate())
        return info.value

    return run(with_anthropic(server, go, **client_kw))


def test_injected_faults_surface_as_the_sdk_exceptions(server: FakeLLMServer) -> None:
    server.inject("429", retry_after_s=2)
    error = _anthropic_error(server)
    assert isinstance(error, anthropic.RateLimitError)
    assert error.response.headers["retry-after"] == "2"
    assert error.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert error.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Rate limit exceeded"},
        "request_id": error.body["request_id"],  # type: ignore[index]
    }
    server.inject("529")
    error = _anthropic_error(server)
    assert isinstance(error, anthropic.InternalServerError) and error.status_code == 529
    assert error.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    server.inject("500")
    error = _anthropic_error(server)
    assert isinstance(error, anthropic.InternalServerError) and error.status_code == 500
    server.inject("drop")
    error = _anthropic_error(server)
    assert type(error) is anthropic.APIConnectionError
    server.inject("slow", delay_s=5)
    started = time.monotonic()
    assert isinstance(_anthropic_error(server, timeout=0.3), anthropic.APITimeoutError)
    assert time.monotonic() - started < 3
    server.inject("malformed")
    assert isinstance(_anthropic_error(server), ValueError)  # json.JSONDecodeError
    faults = [r.fault for r in server.requests]
    assert faults == ["429", "529", "500", "drop", "slow", "malformed"]
    assert [r.status for r in server.requests[:4]] == [429, 529, 500, None]
    assert server.count("messages") == 6 and server.faults.pending == 0


def test_wrong_shape_fails_validation_in_the_sdk(server: FakeLLMServer) -> None:
    server.inject("wrong_shape", times=2)
    lenient = run(with_anthropic(server, lambda c: c.messages.create(**situate())))
    assert lenient.content is None  # the SDK does not validate by default: the caller must
    with pytest.raises(anthropic.APIResponseValidationError):
        run(
            with_anthropic(
                server,
                lambda c: c.messages.create(**situate()),
                _strict_response_validation=True,
            )
        )


def test_openai_faults_and_headers(server: FakeLLMServer) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}

    async def call() -> BaseException:
        client = server.openai_client()
        try:
            with pytest.raises(Exception) as info:
                await client.chat.completions.create(**body)
            return info.value
        finally:
            await client.close()

    server.inject("429", retry_after_s=0.25)
    error = run(call())
    assert isinstance(error, openai.RateLimitError)
    assert error.response.headers["retry-after"] == "0.250"
    assert error.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert error.response.headers["x-ratelimit-reset-requests"] == "250ms"
    assert error.code == "rate_limit_exceeded"
    server.inject("529")
    error = run(call())
    assert isinstance(error, openai.InternalServerError) and error.status_code == 503
    server.inject("drop")
    assert type(run(call())) is openai.APIConnectionError
    body["messages"] = []
    error = run(call())
    assert isinstance(error, openai.BadRequestError) and error.type == "invalid_request_error"


def test_malformed_requests_get_400_in_the_provider_shape(server: FakeLLMServer) -> None:
    bad = situate()
    bad["messages"][0]["role"] = "system"
    with pytest.raises(anthropic.BadRequestError) as info:
        run(with_anthropic(server, lambda c: c.messages.create(**bad)))
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "roles" in info.value.message
    too_many = situate()
    blocks = too_many["messages"][0]["content"]
    blocks.extend({**blocks[0], "text": f"extra {i}"} for i in range(4))
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        run(with_anthropic(server, lambda c: c.messages.create(**too_many)))
    assert server.count(status=400) == 2


def test_server_side_rpm_limit_answers_429_with_retry_after() -> None:
    with FakeLLMServer(rpm_limit=60, rpm_burst=2) as server:

        async def go(c: anthropic.AsyncAnthropic) -> list[Any]:
            out: list[Any] = []
            for _ in range(3):
                try:
                    out.append(await c.messages.with_raw_response.create(**situate()))
                except anthropic.RateLimitError as exc:
                    out.append(exc)
            server.advance(1.0)
            out.append(await c.messages.with_raw_response.create(**situate()))
            return out

        ok1, ok2, limited, after = run(with_anthropic(server, go))
        assert ok1.headers["anthropic-ratelimit-requests-limit"] == "60"
        assert ok1.headers["anthropic-ratelimit-requests-remaining"] == "1"
        assert ok2.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert isinstance(limited, anthropic.RateLimitError)
        assert 0.9 <= float(limited.response.headers["retry-after"]) <= 1.0
        assert after.http_response.status_code == 200
        assert [r.fault for r in server.requests] == [None, None, "rate_limit", None]


def test_random_faults_are_seeded_and_many_connections_are_served() -> None:
    def outcome(seed: int) -> list[str]:
        # Held until 11 are in flight: the peak is the client's concurrency, not the load's.
        with FakeLLMServer(fault_rate=0.3, seed=seed, latency=0.05, gather=11) as server:

            async def go(c: anthropic.AsyncAnthropic) -> list[str]:
                results = await asyncio.gather(
                    *(c.messages.create(**situate(chunk=f"c{i}")) for i in range(40)),
                    return_exceptions=True,
                )
                return [type(r).__name__ for r in results]

            names = run(with_anthropic(server, go))
            assert server.count("messages") == 40
            assert server.peak_in_flight > 10
            return names

    first = outcome(7)
    assert 3 < sum(name != "Message" for name in first) < 25
    assert sorted(first) == sorted(outcome(7))  # arrival order varies, the draws do not


def test_non_json_body_and_unknown_path(server: FakeLLMServer) -> None:
    def post(path: str, data: bytes) -> tuple[int, Any]:
        request = urllib.request.Request(server.base_url + path, data=data, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    status, body = post("/v1/messages", b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = post("/v1/audio/speech", b"{}")
    assert status == 404 and "message" in body["error"]
    server.reset()
    assert server.requests == [] and server.cache_writes_by_prefix() == {}


def test_plugin_fixtures_point_sdks_built_from_the_environment_here(
    fake_llm_env: FakeLLMServer, fake_llm_factory: Callable[..., FakeLLMServer]
) -> None:
    async def go() -> str:
        client = anthropic.AsyncAnthropic(max_retries=0)  # base URL and key from the env
        try:
            message = await client.messages.create(**situate())
        finally:
            await client.close()
        block = message.content[0]
        return block.text if block.type == "text" else ""

    assert run(go()).startswith("This chunk is from Widget handbook")
    assert fake_llm_env.count("messages", 200) == 1
    other = fake_llm_factory(latency=0.01)
    assert other.base_url != fake_llm_env.base_url


def test_two_breakpoints_read_the_shared_one_and_write_the_rest() -> None:
    clock = [0.0]
    cache = AnthropicPromptCache(300, 3600, lambda: clock[0])
    system = PromptPart("You write contexts. " * 300, breakpoint=True, ttl="1h")

    def parts(doc: str) -> list[PromptPart]:
        return [system, PromptPart(doc, breakpoint=True), PromptPart("the chunk")]

    first = cache.plan(SONNET, parts(DOC), 1024)
    assert first.cache_read_input_tokens == 0 and len(first.writes) == 2
    sys_tokens = count_text_tokens(system.text, SONNET)
    assert first.ephemeral_1h == sys_tokens
    assert first.ephemeral_5m == count_text_tokens(DOC, SONNET)
    cache.commit(first)
    second = cache.plan(SONNET, parts(DOC.upper()), 1024)
    assert second.cache_read_input_tokens == sys_tokens
    assert second.cache_creation_input_tokens == count_text_tokens(DOC.upper(), SONNET)
    assert second.input_tokens == count_text_tokens("the chunk", SONNET)
    clock[0] += 301  # the 5-minute document entry expires, the 1-hour system entry does not
    third = cache.plan(SONNET, parts(DOC), 1024)
    assert third.cache_read_input_tokens == sys_tokens and len(third.writes) == 1


def test_a_drip_promises_a_long_body_and_sends_it_a_byte_at_a_time() -> None:
    import http.client

    with FakeLLMServer(drip_interval_s=0.01) as server:
        server.inject("drip", delay_s=0.5)
        host, port = server.base_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("POST", "/v1/chat/completions", body=b"{}")
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("content-length") == "1000000"
        pieces = [response.read1(65536) for _ in range(3)]
        conn.close()
    assert pieces[0].startswith(b"{")
    assert sum(map(len, pieces)) < 1_000  # far short of the promise, and then it stops


def test_a_huge_answer_ignores_the_output_budget() -> None:
    with FakeLLMServer(huge_bytes=50_000) as server:
        server.inject("huge")
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=5
        )
        client.close()
    assert len(answer.choices[0].message.content or "") == 50_000
