"""Slow clients over a real uvicorn on loopback: a client that never finishes its headers is cut
off after CTXR_API_HEADER_TIMEOUT; one that finishes them is served, on a kept-alive connection
too. Before, a connection that sent half a request line stayed open for good."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxr.api.app import create_app
from ctxr.config import load_settings
from tests.fixtures.servers import running, uvicorn_server

TIMEOUT = 0.5  # the server's header timeout in these tests


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    settings = load_settings(index_dir=tmp_path / "none", api_header_timeout=TIMEOUT)
    with running(uvicorn_server(create_app(settings), settings)) as bound:
        yield bound


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(20)  # far above the header timeout: only a server that never closes fails
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (headers and its Content-Length of body) on a kept-alive socket."""
    sock.settimeout(20)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))  # fmt: skip
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_client_that_never_finishes_its_headers_is_cut_off(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and no blank line, ever
        assert _read_all(sock) == b""  # closed by the server, nothing answered


def test_a_silent_connection_is_cut_off(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert _read_all(sock) == b""


def test_complete_requests_are_served_and_the_next_one_gets_the_timeout_too(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = _read_response(sock)
        assert first.startswith(b"HTTP/1.1 503") and b"no ctxr index" in first
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # a second request, never finished
        assert _read_all(sock) == b""
