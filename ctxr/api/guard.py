"""The HTTP API's outer layer: Host check, bearer-token check, body limits and the access log.

A plain ASGI middleware, so it runs before routing and before any body is parsed: a request
for a host the server does not answer is refused 421 (`ctxr.api.hosts`, DNS rebinding), one
without the token 401, both without their body being read; a body over the limit is
answered 413 from its Content-Length, or, when it is sent chunked, as soon as the bytes read
pass the limit, and a body that is not all in within `body_timeout` seconds of the headers
is answered 408 and its connection closed (uvicorn's own timeouts stop at the headers, so a
client sending most of a body, then nothing, held its connection and buffer for good).
Before a 413 the rest of the body is read and thrown away (up to `DRAIN_BYTES` within
`DRAIN_SECONDS`): a client that sends its whole body before reading (Python's urllib,
http.client) would otherwise meet a closed socket and see ECONNRESET or EPIPE, not the 413.
Every request then gets one JSON line on the ``ctxr.api.access`` logger: method,
path, status, duration and, for searches, what the endpoint recorded in the scope under
`ACCESS_KEY` (number of queries, k, mode, fusion; the query text only when configured). The
token never reaches the log: headers are not logged at all.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxr.api.hosts import HostPolicy

ACCESS_KEY = "ctxr.access"  # scope key where endpoints leave fields for the access line
# Scope key: whether the request carried a valid token, for endpoints that answer everyone
# but say more to a client that proved it may (/health names the index's files only to it).
AUTHORISED_KEY = "ctxr.authorised"
access_log = logging.getLogger("ctxr.api.access")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# How much of an over-limit body is read and dropped so the client can read its 413. A body
# declared larger than this is answered at once (its sender may see a reset).
DRAIN_BYTES = 64 * 1024 * 1024
DRAIN_SECONDS = 15.0


class Guard:
    """`token` is CTXR_API_TOKEN; `owner_token` the one a server that owns its index wrote in
    the owner file (`ctxr.index.owner`), accepted like it. `private_paths` (the live index's
    write endpoint) change what is indexed: they always need the owner token or
    `update_token` (CTXR_API_UPDATE_TOKEN), never CTXR_API_TOKEN (403), even where no API
    token is set, and answer only clients on this machine (loopback, or the server's own
    address). `hosts` is the Host-header policy; None answers every host."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body_bytes: int,
        log_requests: bool = True,
        open_paths: frozenset[str] = frozenset({"/health"}),
        owner_token: str | None = None,
        private_paths: frozenset[str] = frozenset(),
        update_token: str | None = None,
        hosts: HostPolicy | None = None,
        body_timeout: float | None = None,
    ) -> None:
        self.app = app
        self._token = token.encode("utf-8") if token else None
        self._tokens = [t.encode("utf-8") for t in (token, owner_token) if t]
        self._writers = [t.encode("utf-8") for t in (owner_token, update_token) if t]
        self._hosts = hosts
        self._body_timeout = body_timeout
        self._max_body = max_body_bytes
        self._log = log_requests
        self._open = open_paths
        self._private = private_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the line says if the app dies before answering
        scope[ACCESS_KEY] = {}

        async def send_and_see(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            refusal = self._refuse(scope)
            if refusal is None and scope["method"] in _BODY_METHODS:
                refusal, receive = await self._read_body(scope, receive)
            if refusal is not None:
                await _answer(send_and_see, *refusal)
            else:
                await self.app(scope, receive, send_and_see)
        finally:
            if self._log:
                self._write_line(scope, status, started)

    def _refuse(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        refused = self._hosts.refusal(scope) if self._hosts is not None else None
        if refused is not None:
            return refused[0], refused[1], [(b"connection", b"close")]
        private = scope["path"] in self._private
        if private and not _local(scope):
            return 403, "this endpoint answers only clients on the server's own machine", []
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        scheme, _, credential = given.partition(b" ")
        bearer = scheme.lower() == b"bearer"
        credential = credential.strip()
        searcher = bearer and _matches(credential, self._tokens)
        scope[AUTHORISED_KEY] = searcher
        if private:
            return self._refuse_writer(given, bearer and _matches(credential, self._writers),
                                       searcher)  # fmt: skip
        if self._token is None or scope["path"] in self._open or searcher:
            return None
        reason = "wrong bearer token" if given else "missing bearer token"
        return (
            401,
            f"{reason}: send Authorization: Bearer <CTXR_API_TOKEN>",
            [(b"www-authenticate", b"Bearer")],
        )

    def _refuse_writer(
        self, given: bytes, writer: bool, searcher: bool
    ) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if writer:
            return None
        if searcher and self._token is not None:
            return 403, (
                "CTXR_API_TOKEN lets a client search, not change what is indexed: this "
                "endpoint needs the owner file's token (what `ctxr watch` sends) or "
                "CTXR_API_UPDATE_TOKEN"
            ), []  # fmt: skip
        reason = "wrong bearer token" if given else "missing bearer token"
        return (
            401,
            f"{reason}: this endpoint changes the index and needs the owner file's token (what "
            "`ctxr watch` sends) or CTXR_API_UPDATE_TOKEN",
            [(b"www-authenticate", b"Bearer")],
        )

    async def _read_body(
        self, scope: Scope, receive: Receive
    ) -> tuple[tuple[int, str, list[tuple[bytes, bytes]]] | None, Receive]:
        too_large = (
            413,
            f"request body over {self._max_body} bytes (CTXR_API_MAX_BODY_BYTES)",
            [(b"connection", b"close")],
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._body_timeout if self._body_timeout else None
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return (400, "malformed Content-Length header", []), receive
                if declared > self._max_body:
                    if declared <= DRAIN_BYTES:
                        await _drain(receive, DRAIN_BYTES)
                    return too_large, receive
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                # `timeout_at` arms a timer on this task; `wait_for` made a task per message,
                # about 0.1 ms of each request's time.
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                too_slow = (
                    408,
                    f"request body not received within {self._body_timeout:g} s "
                    "(CTXR_API_BODY_TIMEOUT); send the whole body at once",
                    [(b"connection", b"close")],
                )
                return too_slow, receive
            if message["type"] != "http.request":  # the client went away
                return None, _replay([message], receive)
            body = message.get("body", b"")
            size += len(body)
            if size > self._max_body:
                if message.get("more_body", False):
                    await _drain(receive, DRAIN_BYTES - size)
                return too_large, receive
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        return None, _replay([whole], receive)

    def _write_line(self, scope: Scope, status: int, started: float) -> None:
        line: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"],
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        client = scope.get("client")
        if client:
            line["client"] = client[0]
        line.update(scope.get(ACCESS_KEY) or {})
        access_log.info(json.dumps(line, ensure_ascii=False))


def _matches(credential: bytes, tokens: list[bytes]) -> bool:
    # compare_digest: the time taken says nothing about how much of a token matched; every
    # token is compared, so neither does which one matched.
    matched = [hmac.compare_digest(credential, t) for t in tokens]
    return any(matched)


def _local(scope: Scope) -> bool:
    """Whether the client is on this machine: loopback, or the address the server listens on."""
    client, server = scope.get("client"), scope.get("server")
    host = client[0] if client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a Unix socket or no peer at all: nothing says it is local
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack socket
    if address.is_loopback or (mapped is not None and mapped.is_loopback):
        return True
    return server is not None and host == server[0]


async def _drain(receive: Receive, budget: int) -> None:
    """Read and drop what is left of a request body: at most `budget` bytes, `DRAIN_SECONDS`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_SECONDS
    while budget > 0:
        try:
            message = await asyncio.wait_for(receive(), timeout=max(deadline - loop.time(), 0))
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out `messages` first, then defers to the real one."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _answer(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
