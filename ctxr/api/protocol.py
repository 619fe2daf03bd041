"""The HTTP protocol both servers run (`ctxr serve`, `ctxr mcp --http`): uvicorn's h11 protocol
with a header-read timeout, and a cap on open connections.

uvicorn closes a connection left idle after a response (`timeout_keep_alive`), but it sets no
limit on how long a client may take to send a request's headers: a client that connects and
sends nothing, or one header byte every few seconds (the keep-alive timer restarts on every
byte), holds a connection, and its slot, for as long as it likes. Here a timer starts whenever
the connection is ready for a request (accepted, or its last response sent) and the connection
is closed if the request's headers are not complete within `CTXR_API_HEADER_TIMEOUT` seconds.
Reading the body is bounded by the guard's body deadline (`ctxr.api.guard`, 408); computing
the answer is not limited here.

Open connections are capped at `CTXR_API_MAX_CONNECTIONS` (uvicorn's `limit_concurrency`):
past it a new request is answered 503 and its connection closed, so a flood of slow clients
costs at most that many sockets and buffers.

Every connection sends what it is given at once (``TCP_NODELAY``). asyncio sets that only on
connections of a listening socket made with ``proto=IPPROTO_TCP``; `ctxr serve` listens on a
socket of its own making (`ctxr.api.app.owning_server`, ``socket.create_server``: proto 0),
so its connections used Nagle's algorithm: a response's body, written after its headers,
waited for the client to acknowledge them, and a client delays that acknowledgement by 40 ms.
Every request but a connection's first took 40 ms more than its search.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

    from ctxr.config import ApiSettings


class HeaderTimeoutProtocol(H11Protocol):
    header_timeout: float = 10.0  # set per server by `with_header_timeout`

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        _send_at_once(transport)
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._waiting_for: Any = None
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_timer is not None and self.cycle is not self._waiting_for:
            self._stop_header_timer()  # a new request's headers are in: it has its cycle

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # may start a pipelined request (a new cycle)
        if not self.transport.is_closing() and self.cycle is before:
            self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._waiting_for = self.cycle  # the cycle before the next request's
        self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def _send_at_once(transport: asyncio.Transport) -> None:
    """``TCP_NODELAY`` on the connection's socket (see the module's docstring)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):  # a socket already closing: nothing to send
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for one server (uvicorn takes a class, not an instance)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})


def server_config(api: ApiSettings, app: ASGIApp, host: str, port: int) -> uvicorn.Config:
    """uvicorn's configuration for either server: this protocol, the connection cap, no
    uvicorn access log (the guard writes its own)."""
    import uvicorn

    return uvicorn.Config(
        app, host=host, port=port, access_log=False, log_level="info",
        http=with_header_timeout(api.api_header_timeout),
        limit_concurrency=api.api_max_connections,
    )  # fmt: skip
