"""Every connection of `ctxr serve`'s own server sends at once (TCP_NODELAY). Its listening
socket is made with proto 0, on whose connections asyncio leaves Nagle's algorithm on: a
response's body then waited for the client's delayed acknowledgement of its headers, 40 ms on
every request of a kept-alive connection but the first."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from ctxr.api.app import owning_server
from ctxr.config import load_settings
from tests.fixtures.servers import HOST, running


def test_serves_connections_without_nagle(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none")  # no index: /health answers 503
    server, sock = owning_server(settings, HOST, 0)  # `ctxr serve`'s own server
    with running(server, [sock]) as port, httpx.Client(base_url=f"http://{HOST}:{port}") as http:
        for _ in range(2):  # a kept-alive connection: the second request is the one Nagle held
            assert http.get("/health").status_code == 503
        sockets = [c.transport.get_extra_info("socket") for c in server.server_state.connections]
        assert sockets, "the client's connection is open"
        for accepted in sockets:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
