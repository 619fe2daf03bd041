"""What one client may make the servers hold or spend, with small limits so nothing is loaded:
a body not sent within the deadline (408), connections past the cap (503), paid rerank calls
past the per-request cap (422), MCP HTTP sessions past the cap (503) or left idle (closed).

Before, a connection that sent most of a body and then nothing stayed open for good (uvicorn's
header timeout stops at the headers: 3,000 such connections held 195 MB and 3,000 sockets);
connections were not capped; a request of 32 queries with "rerank": "llm" made 32 paid calls;
4,000 MCP sessions held 166 MB for the SDK's 30 idle minutes.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.config import load_settings
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.environment import use_fake_llm
from tests.fixtures.index import BuiltIndex
from tests.fixtures.servers import MCP_ACCEPT, MCP_HELLO, running, serving_mcp, uvicorn_server

DEADLINE = 60.0  # seconds any awaited condition may take on a loaded machine


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(DEADLINE)  # only a server that never answers nor closes fails
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _wait_for(what: str, check: Callable[[], bool], every: float = 0.05) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {DEADLINE} s"
        time.sleep(every)


def test_a_body_not_sent_in_time_is_answered_408_and_closed(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none", api_body_timeout=0.3)
    with (
        running(uvicorn_server(create_app(settings), settings)) as port,
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        sock.sendall(
            b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"query": "' + b"x" * 500
        )  # and the rest never
        answer = _read_all(sock)  # the server answers, then closes
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"CTXR_API_BODY_TIMEOUT" in answer


def test_connections_past_the_cap_get_503_until_one_closes(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none", api_max_connections=2,
                             api_header_timeout=DEADLINE)  # fmt: skip
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"

    def answer(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            return _read_all(sock)

    # Without an index /health itself answers 503, in JSON naming the index; past the cap
    # uvicorn answers 503 "Service Unavailable" before the app sees the request.
    with running(uvicorn_server(create_app(settings), settings)) as port:
        assert b"no ctxr index" in answer(port)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        try:
            # Until the server has accepted both idle connections, a request may still pass.
            _wait_for("a request past the cap is refused",
                      lambda: answer(port).endswith(b"Service Unavailable"))  # fmt: skip
        finally:
            for sock in idle:
                sock.close()
        _wait_for("the cap frees up", lambda: b"no ctxr index" in answer(port))


def test_a_request_may_not_rerank_more_queries_than_the_cap(
    examples_index: BuiltIndex,
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm = fake_llm_factory(respond=lambda body: json.dumps([{"id": 0, "score": 1.0}]))
    use_fake_llm(monkeypatch, llm)
    settings = examples_index.settings_with(api_max_rerank_queries=2, rerank_candidates=5)
    queries = ["backup and restore", "thumbnail cache", "migration lock"]
    with TestClient(create_app(settings)) as client:
        refused = client.post("/search", json={"queries": queries, "k": 2, "rerank": "llm"})
        assert refused.status_code == 422, refused.text
        assert "CTXR_API_MAX_RERANK_QUERIES" in refused.json()["detail"]
        assert llm.count() == 0  # refused before any paid call
        fused = client.post("/search", json={"queries": queries, "k": 2, "rerank": "none"})
        assert fused.status_code == 200
        within = client.post("/search", json={"queries": queries[:2], "k": 2, "rerank": "llm"})
        assert within.status_code == 200, within.text
        assert llm.count() == 2


# -- MCP HTTP sessions ----------------------------------------------------------------------

def _open_session(url: str) -> httpx.Response:
    return httpx.post(url, json=MCP_HELLO, headers=MCP_ACCEPT, timeout=DEADLINE)


def test_mcp_sessions_past_the_cap_get_503(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none", mcp_max_sessions=2)
    with serving_mcp(settings) as url:
        opened = [_open_session(url) for _ in range(2)]
        assert all(r.status_code == 200 and r.headers.get("mcp-session-id") for r in opened)
        assert _open_session(url).status_code == 503


def test_an_idle_mcp_session_is_closed_and_its_id_answers_404(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none", mcp_session_idle_timeout=0.5)
    with serving_mcp(settings) as url:
        first = _open_session(url)
        session = first.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        headers = {**MCP_ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}

        def gone() -> bool:
            return httpx.post(url, json=ping, headers=headers).status_code == 404

        # Each look is a request to the session, which keeps it alive for another timeout:
        # look less often than that.
        _wait_for("the idle session is closed", gone, every=1.0)
        assert _open_session(url).status_code == 200  # a new one opens
