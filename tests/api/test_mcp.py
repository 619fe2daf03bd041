"""`ctxr mcp` through the MCP SDK's own client: over stdio (a `ctxr mcp` subprocess) and over
the streamable HTTP transport (a real uvicorn on loopback, behind the API's bearer token).

The index is the session's examples index, built by the real pipeline with the real embedder.
A qdrant-edge shard is open in one process at a time, so each test's server is closed before
the next one starts (the stdio subprocess exits when its client leaves).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter

from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT
from tests.fixtures.servers import MCP_HELLO, serving_mcp

mcp = pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'ctxr[mcp]'")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.types import TextResourceContents  # noqa: E402

from ctxr.api.mcp import IndexHolder, create_server  # noqa: E402
from ctxr.cli import main  # noqa: E402
from ctxr.config import Settings  # noqa: E402
from ctxr.retrieve.hits import HitRecord, HitsResult, hit_json  # noqa: E402
from ctxr.retrieve.service import SearchService  # noqa: E402

TOKEN = "mcp-test-token"
QUERY = "fix LUM-E310 migration lock held"
HIT_FIELDS = set(TypeAdapter(HitRecord).json_schema()["properties"])
# A ClientSession (stdio, HTTP) or the SDK's in-process Client: both have the calls used here.
Session = Callable[[Any], Awaitable[None]]


def _stdio(index_dir: Path, *extra: str) -> StdioServerParameters:
    # The installed `ctxr` script beside this interpreter: the entry point a client runs.
    script = Path(sys.executable).with_name("ctxr")
    command, args = (str(script), []) if script.exists() else (sys.executable, ["-c", _MAIN])
    return StdioServerParameters(
        command=command, args=[*args, "mcp", "--index", str(index_dir), *extra], cwd=str(ROOT)
    )


_MAIN = "from ctxr.cli import main; main()"


def _run_stdio(index_dir: Path, body: Session) -> None:
    async def drive() -> None:
        async with (
            stdio_client(_stdio(index_dir)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await body(session)

    asyncio.run(asyncio.wait_for(drive(), timeout=120))


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def _search_checks(session: ClientSession, index: BuiltIndex) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"search", "get_document", "get_passage"}
    assert all(len(t.description or "") > 200 for t in tools.values())  # written for a model
    schema = tools["search"].input_schema
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "k", "mode", "filters", "merge"}
    for tool in tools.values():  # strict, and said to only read this machine's index
        assert tool.input_schema["additionalProperties"] is False, tool.name
        hints = tool.annotations
        assert hints is not None and hints.read_only_hint is True, tool.name
        assert hints.open_world_hint is False and hints.destructive_hint is False
        assert tool.title and hints.title == tool.title
    unknown = await session.call_tool("search", {"query": QUERY, "colour": "red"})
    assert unknown.is_error and "`colour` is not an argument of search" in _text(unknown)

    result = await session.call_tool("search", {"query": QUERY, "k": 3})
    assert not result.is_error, _text(result)
    hits = result.structured_content["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert hits[0]["source"] == "examples/docs/faq.md" and "LUM-E310" in hits[0]["text"]
    # The hit schema every face writes (the shard is the server's, so the Python API's own
    # hits are compared in the in-process test).
    assert HitsResult.model_validate(result.structured_content).query == QUERY
    assert all(set(h) == HIT_FIELDS for h in hits)
    assert json.loads(_text(result)) == result.structured_content  # text mirrors structured

    filtered = await session.call_tool(
        "search",
        {"query": "cache", "k": 5, "mode": "bm25", "filters": {"source": "examples/lumen/"}},
    )
    assert not filtered.is_error, _text(filtered)
    sources = {h["source"] for h in filtered.structured_content["hits"]}
    assert sources and all(s.startswith("examples/lumen/") for s in sources)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": QUERY, "k": 0}, "k"),
        ({"query": QUERY, "k": 101}, "k"),
        ({"k": 3}, "query"),
        ({"query": "   "}, "query"),
        ({"query": QUERY, "mode": "fuzzy"}, "mode"),
        ({"query": QUERY, "filters": {"colour": "red"}}, "filters"),
        ({"query": QUERY, "k": "many"}, "k"),
        ({"query": QUERY, "top_k": 3}, "top_k"),
    ],
)
def test_bad_arguments_are_tool_errors_naming_the_field(
    examples_index: BuiltIndex, arguments: dict[str, Any], field: str
) -> None:
    async def body(session: ClientSession) -> None:
        result = await session.call_tool("search", arguments)
        assert result.is_error
        text = _text(result)
        # One sentence naming the field, not pydantic's report and its link to its own docs.
        assert f"`{field}`" in text and text.endswith("call search again."), text
        assert "pydantic" not in text and "\n" not in text and "[type=" not in text, text
        after = await session.call_tool("search", {"query": QUERY, "k": 1})  # still serving
        assert not after.is_error

    asyncio.run(_in_process(examples_index.settings_with(), body))


async def _in_process(settings: Settings, body: Session) -> None:
    from mcp.client import Client

    holder = IndexHolder(settings)
    try:
        async with Client(create_server(settings, holder)) as client:
            await body(client)
    finally:
        holder.close()


def test_in_process_hits_are_the_python_apis(examples_index: BuiltIndex) -> None:
    settings = examples_index.settings_with()
    with SearchService(settings) as service:
        expected = [hit_json(h) for h in service.search(QUERY, 4, "hybrid")]

    async def body(client: Any) -> None:
        result = await client.call_tool("search", {"query": QUERY, "k": 4})
        assert result.structured_content["hits"] == expected

    asyncio.run(_in_process(settings, body))


def test_stdio_subprocess_lists_tools_searches_and_reads(examples_index: BuiltIndex) -> None:
    async def body(session: ClientSession) -> None:
        await _search_checks(session, examples_index)
        await _document_and_passage_checks(session)
        stats = await session.read_resource("ctxr://index/stats")
        contents = stats.contents[0]
        assert isinstance(contents, TextResourceContents)
        body = json.loads(contents.text)
        assert body["points"] == examples_index.report.points_total and body["documents"] == 10

    _run_stdio(examples_index.index_dir, body)


async def _document_and_passage_checks(session: ClientSession) -> None:
    hit = (await session.call_tool("search", {"query": QUERY, "k": 1})).structured_content["hits"][
        0
    ]
    text = (ROOT / hit["source"]).read_bytes().decode("utf-8-sig")

    page = await session.call_tool("get_document", {"doc_id": hit["doc_id"], "max_chunks": 2})
    assert not page.is_error, _text(page)
    doc = page.structured_content
    assert [c["index"] for c in doc["chunks"]] == [0, 1] and doc["next_chunk"] == 2
    assert all(text[c["start"] : c["end"]] == c["text"] for c in doc["chunks"])
    rest = await session.call_tool(
        "get_document", {"doc_id": hit["doc_id"], "first_chunk": 2, "max_chunks": 200}
    )
    assert rest.structured_content["next_chunk"] is None
    assert len(rest.structured_content["chunks"]) == doc["total_chunks"] - 2
    total = doc["total_chunks"]
    for past in (total, 999):  # past the last chunk: an error with the count, not an empty page
        beyond = await session.call_tool(
            "get_document", {"doc_id": hit["doc_id"], "first_chunk": past}
        )
        assert beyond.is_error, beyond.structured_content
        assert f"has {total} chunks" in _text(beyond) and f"0 to {total - 1}" in _text(beyond)

    passage = await session.call_tool(
        "get_passage",
        {"doc_id": hit["doc_id"], "start": hit["start"], "end": hit["end"], "window": 120},
    )
    assert not passage.is_error, _text(passage)
    p = passage.structured_content
    assert p["text"] == text[p["start"] : p["end"]]  # exact, straight from the index
    assert p["start"] < hit["start"] and p["end"] > hit["end"]
    assert hit["text"] in p["text"]

    for args, words in [
        ({"doc_id": "examples/no/such.md"}, "no document 'examples/no/such.md'"),
        ({"doc_id": hit["doc_id"], "start": 10, "end": 5}, "must be greater than start"),
        ({"doc_id": hit["doc_id"], "start": 10**7, "end": 10**7 + 5}, "no indexed text"),
    ]:
        tool = "get_document" if "start" not in args else "get_passage"
        result = await session.call_tool(tool, args)
        assert result.is_error and words in _text(result), _text(result)


def test_a_missing_index_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        assert len((await session.list_tools()).tools) == 3  # the server starts regardless
        for _ in range(2):  # retried, not remembered, and never a crash
            result = await session.call_tool("search", {"query": "anything"})
            assert result.is_error
            assert str(tmp_path / "none") in _text(result) and "ctxr index" in _text(result)

    _run_stdio(tmp_path / "none", body)


# -- the streamable HTTP transport, behind the bearer token ------------------------------------


@pytest.fixture(scope="class")
def mcp_url(examples_index: BuiltIndex) -> Iterator[str]:
    with serving_mcp(examples_index.settings_with(api_token=TOKEN)) as url:
        yield url


def _run_http(url: str, token: str | None, body: Session) -> None:
    import httpx2

    async def drive() -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await body(session)

    asyncio.run(asyncio.wait_for(drive(), timeout=120))


class TestHttp:
    """In-process uvicorn over the class's own server: the shard is released when it ends."""

    def test_with_the_token_lists_tools_and_searches(
        self, mcp_url: str, examples_index: BuiltIndex
    ) -> None:
        async def body(session: ClientSession) -> None:
            await _search_checks(session, examples_index)
            bad = await session.call_tool("get_passage", {"doc_id": "x", "start": -1, "end": 3})
            assert bad.is_error and "`start` should be greater than or equal to 0" in _text(bad)

        _run_http(mcp_url, TOKEN, body)

    def test_without_the_token_is_401_before_any_mcp(self, mcp_url: str) -> None:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = httpx.post(mcp_url, json=hello, headers=headers)
            assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
            assert TOKEN not in response.text
        # The SDK's own client is refused at once (an error, not a hang or a session).
        with pytest.raises(ExceptionGroup) as refused:
            _run_http(mcp_url, "wrong", _nothing)
        assert refused.group_contains(MCPError, match="error response", depth=2)


async def _nothing(session: ClientSession) -> None:
    return None


def test_mcp_command_help_and_a_bad_address() -> None:
    result = CliRunner().invoke(main, ["mcp", "--help"])
    assert result.exit_code == 0 and "--http" in result.output and "stdio" in result.output
    bad = CliRunner().invoke(main, ["mcp", "--http", "nowhere"])
    assert bad.exit_code == 2 and "HOST:PORT" in bad.output


def test_mcp_http_command_serves_behind_the_token(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    import os
    import socket
    import subprocess

    with socket.socket() as probe:  # a free port for the child to bind
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    params = _stdio(examples_index.index_dir, "--http", f"127.0.0.1:{port}")
    env = {**os.environ, "CTXR_API_TOKEN": TOKEN}
    log = (tmp_path / "server.log").open("w")
    child = subprocess.Popen([params.command, *params.args], cwd=ROOT, env=env, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while True:
            assert child.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.post(url, json={}).status_code == 401:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "ctxr mcp --http did not start"
                time.sleep(0.1)

        async def body(session: ClientSession) -> None:
            result = await session.call_tool("search", {"query": QUERY, "k": 2})
            assert not result.is_error and len(result.structured_content["hits"]) == 2

        _run_http(url, TOKEN, body)
    finally:
        child.terminate()
        child.wait(timeout=20)
        log.close()


def test_stdio_answers_a_message_it_cannot_read_with_a_json_rpc_error(tmp_path: Path) -> None:
    # Before, a request nested 500 levels deep (past pydantic's JSON recursion limit) and a
    # line that is not JSON got no answer at all: the client waited for good.
    import subprocess

    params = _stdio(tmp_path / "none")
    child = subprocess.Popen(
        [params.command, *params.args], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    stdout = child.stdout
    replies: list[dict[str, Any]] = []
    threading.Thread(target=lambda: replies.extend(json.loads(x) for x in stdout),
                     daemon=True).start()  # fmt: skip

    def send(message: dict[str, Any] | str) -> None:
        assert child.stdin is not None
        child.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
        child.stdin.flush()

    def reply_to(request_id: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            found = [r for r in replies if r.get("id") == request_id and "jsonrpc" in r]
            if found:
                return found[0]
            assert child.poll() is None and time.monotonic() < deadline, replies
            time.sleep(0.05)

    deep: Any = "x"
    for _ in range(500):
        deep = [deep]
    try:
        send(MCP_HELLO)
        assert "result" in reply_to(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", '
            '"arguments": {"query": "x", "filters": {"source": ' + json.dumps(deep) + "}}}}"
        )
        deep_error = reply_to(7)["error"]
        assert deep_error["code"] == -32700 and "nests deeper" in deep_error["message"]
        send("this is not json")
        assert reply_to(None)["error"]["code"] == -32700
        send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})  # and it goes on serving
        assert len(reply_to(8)["result"]["tools"]) == 3
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_the_top_level_id_is_found_without_parsing_the_rest() -> None:
    from ctxr.api.mcp_stdio import top_level_id

    assert top_level_id('{"jsonrpc": "2.0", "params": {"id": 3}, "id": "a\\"b"}') == 'a"b'
    assert top_level_id('{"id": 12, "params": ' + "[" * 5000) == 12
    assert top_level_id('{"params": {"id": 3}}') is None
    assert top_level_id("[1, 2]") is None and top_level_id("garbage") is None
    assert top_level_id('{"id": true}') is None
