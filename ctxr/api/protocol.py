"""The HTTP protocol `ctxr serve` runs: uvicorn's h11 protocol with a header-read timeout.

uvicorn closes a connection left idle after a response (`timeout_keep_alive`), but it sets no
limit on how long a client may take to send a request's headers: a client that connects and
sends nothing, or one header byte every few seconds (the keep-alive timer restarts on every
byte), holds a connection, and its slot, for as long as it likes. Here a timer starts whenever
the connection is ready for a request (accepted, or its last response sent) and the connection
is closed if the request's headers are not complete within `CTXR_API_HEADER_TIMEOUT` seconds.
Reading the body and computing the answer are not limited by it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutProtocol(H11Protocol):
    header_timeout: float = 10.0  # set per server by `with_header_timeout`

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
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


def with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for one server (uvicorn takes a class, not an instance)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})
