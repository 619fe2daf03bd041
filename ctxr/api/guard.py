"""The HTTP API's outer layer: bearer-token check, body-size limit and the access log.

A plain ASGI middleware, so it runs before routing and before any body is parsed: a request
without the token is answered 401 without its body being read, and a body over the limit is
answered 413 from its Content-Length, or, when it is sent chunked, as soon as the bytes read
pass the limit. Every request then gets one JSON line on the ``ctxr.api.access`` logger: method,
path, status, duration and, for searches, what the endpoint recorded in the scope under
`ACCESS_KEY` (number of queries, k, mode, fusion; the query text only when configured). The
token never reaches the log: headers are not logged at all.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ACCESS_KEY = "ctxr.access"  # scope key where endpoints leave fields for the access line
access_log = logging.getLogger("ctxr.api.access")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body_bytes: int,
        log_requests: bool = True,
        open_paths: frozenset[str] = frozenset({"/health"}),
    ) -> None:
        self.app = app
        self._token = token.encode("utf-8") if token else None
        self._max_body = max_body_bytes
        self._log = log_requests
        self._open = open_paths

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
        if self._token is None or scope["path"] in self._open:
            return None
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        scheme, _, credential = given.partition(b" ")
        # compare_digest: the time taken says nothing about how much of the token matched.
        if scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self._token):
            return None
        reason = "wrong bearer token" if given else "missing bearer token"
        return (
            401,
            f"{reason}: send Authorization: Bearer <CTXR_API_TOKEN>",
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
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    if int(value) > self._max_body:
                        return too_large, receive
                except ValueError:
                    return (400, "malformed Content-Length header", []), receive
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None, _replay([message], receive)
            body = message.get("body", b"")
            size += len(body)
            if size > self._max_body:
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
