"""`ctxr mcp` over stdio, where every line the client sends gets an answer.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message: it logs nothing
and answers nothing, so a client that sent one request nested deeper than the JSON reader
accepts (pydantic's recursion limit, a few hundred levels), or one malformed line, waits for
an answer that never comes. Here such a line is answered as JSON-RPC 2.0 says: a parse error
(-32700) or an invalid request (-32600), with the request's id when its top level names one
(found without parsing the nested part), else ``"id": null``. The answer goes through the
transport's own writer, so it never interleaves with the server's.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

_ID_DECODER = json.JSONDecoder()


async def serve_stdio_answering(server: MCPServer) -> None:
    """Run `server` on stdin/stdout, answering every unreadable line with a JSON-RPC error."""
    # What MCPServer.run("stdio") does, with the read side wrapped.
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write):
        await lowlevel.run(_Answering(read, write), write, lowlevel.create_initialization_options())


class _Answering:
    """The transport's read stream, minus the lines it could not read, which are answered."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:  # the sender's contextvars, as the SDK's stream keeps them
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._write.send(SessionMessage(unreadable_answer(item)))

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def unreadable_answer(error: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the transport could not read (`error` says why)."""
    line = ""
    kind = ""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        kind = str(first.get("type", ""))
        raw = first.get("input")
        line = raw if isinstance(raw, str) else ""
    request_id = top_level_id(line)
    if "recursion limit" in str(error):
        code, message = PARSE_ERROR, (
            "the message nests deeper than this server reads (a few hundred levels); send "
            "arguments with fewer levels"
        )  # fmt: skip
    elif kind == "json_invalid":
        code, message = PARSE_ERROR, "the line is not valid JSON; send one JSON-RPC message a line"
    else:
        code, message = (
            INVALID_REQUEST,
            ("the line is JSON but not a JSON-RPC 2.0 request, notification or response"),
        )
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def top_level_id(line: str) -> int | str | None:
    """The `id` member of the JSON object `line` holds at its top level, or None; read by
    scanning, so a message too deep to parse still gets its answer to the right request."""
    depth = 0
    i = 0
    n = len(line)
    key_expected = False
    while i < n:
        ch = line[i]
        if ch == '"':
            try:
                text, end = _ID_DECODER.raw_decode(line, i)
            except ValueError:
                return None
            if depth == 1 and key_expected and text == "id":
                j = end
                while j < n and line[j] in " \t\r\n":
                    j += 1
                if j < n and line[j] == ":":
                    return _scalar_at(line, j + 1)
            key_expected = False
            i = end
            continue
        if ch in "{[":
            depth += 1
            key_expected = ch == "{" and depth == 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 1:
            key_expected = True
        i += 1
    return None


def _scalar_at(line: str, start: int) -> int | str | None:
    try:
        value, _ = _ID_DECODER.raw_decode(line, len(line) - len(line[start:].lstrip()))
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value
