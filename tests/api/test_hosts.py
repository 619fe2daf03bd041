"""The Host check both servers make against DNS rebinding (`ctxr.api.hosts`).

Before, `ctxr serve` on loopback with no token answered a request for `Host: evil.rebind.example`
with 200 and hits: a page that rebinds its own name to 127.0.0.1 could read the whole index.
`ctxr mcp --http` answered 421 only through the SDK's own list, which knew no configured name.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxr.api.app import owning_server
from ctxr.api.hosts import HostPolicy
from ctxr.config import Settings, load_settings
from tests.conftest import BuiltIndex

EVIL = "evil.rebind.example"


def _settings(index: BuiltIndex, **overrides: object) -> Settings:
    return load_settings(index_dir=index.index_dir, cache_dir=index.cache_dir, **overrides)


class _Running:
    """`ctxr serve`'s own server (`owning_server`) on a free loopback port, in a thread."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1") -> None:
        self.server, sock = owning_server(settings, host, 0)
        self.port = sock.getsockname()[1]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.daemon = True

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def served(examples_index: BuiltIndex, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # A copy: the server that owns it writes its owner file there.
    copy = tmp_path_factory.mktemp("hosts") / "idx"
    shutil.copytree(examples_index.index_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    settings = load_settings(
        index_dir=copy, cache_dir=examples_index.cache_dir, api_allowed_hosts="search.lan"
    )
    with _Running(settings) as url:
        yield url


def test_a_rebinding_host_is_refused_421_before_any_answer(served: str) -> None:
    query = {"query": "backup and restore", "k": 2}
    for path in ("/search", "/health", "/stats", "/documents/examples/docs/faq.md"):
        method = "POST" if path == "/search" else "GET"
        refused = httpx.request(method, served + path, json=query, headers={"Host": EVIL})
        assert refused.status_code == 421, (path, refused.text)
        assert "CTXR_API_ALLOWED_HOSTS" in refused.json()["detail"]
        assert "hits" not in refused.text
    port = served.rsplit(":", 1)[1]
    for host in ("localhost", f"localhost:{port}", "127.0.0.1", "[::1]:8000", "search.lan",
                 "SEARCH.LAN.", "10.0.0.7:80"):  # fmt: skip
        answered = httpx.post(served + "/search", json=query, headers={"Host": host})
        assert answered.status_code == 200, (host, answered.text)
        assert answered.json()["hits"]


def test_a_page_elsewhere_is_refused_by_its_origin(served: str) -> None:
    query = {"query": "backup", "k": 1}
    page = httpx.post(served + "/search", json=query, headers={"Origin": f"http://{EVIL}"})
    assert page.status_code == 403 and "CTXR_API_ALLOWED_HOSTS" in page.json()["detail"]
    same = httpx.post(served + "/search", json=query, headers={"Origin": served})
    assert same.status_code == 200


def test_the_policy_on_every_interface() -> None:
    open_to_names = HostPolicy.for_server("0.0.0.0", (), token_set=True)
    assert open_to_names.accepts(EVIL)  # a rebinding page cannot send the token
    tokenless = HostPolicy.for_server("0.0.0.0", (), token_set=False)
    assert not tokenless.accepts(EVIL) and tokenless.accepts("192.168.1.9:8000")
    listed = HostPolicy.for_server("::", ("search.lan",), token_set=True)
    assert listed.accepts("search.lan:8000") and not listed.accepts(EVIL)
    assert HostPolicy.for_server("127.0.0.1", ("*",), token_set=False).accepts(EVIL)
    named = HostPolicy.for_server("box.lan", (), token_set=False)
    assert named.accepts("box.lan:8000") and not named.accepts(EVIL)
    assert not named.accepts("")


def test_serve_and_mcp_take_allowed_hosts_flags() -> None:
    from click.testing import CliRunner

    from ctxr.cli import main

    for command in ("serve", "mcp"):
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0 and "--allowed-host" in result.output


def test_mcp_http_refuses_a_rebinding_host_and_takes_a_configured_one(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    pytest.importorskip("mcp")
    import uvicorn

    from ctxr.api.mcp import IndexHolder, create_server, http_app

    settings = _settings(examples_index, api_allowed_hosts="agents.lan")
    holder = IndexHolder(settings)
    app = http_app(settings, create_server(settings, holder), "127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/mcp"
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        accept = {"Accept": "application/json, text/event-stream"}
        refused = httpx.post(url, json=hello, headers={**accept, "Host": EVIL})
        assert refused.status_code == 421 and "CTXR_API_ALLOWED_HOSTS" in refused.text
        taken = httpx.post(url, json=hello, headers={**accept, "Host": "agents.lan:9"})
        assert taken.status_code == 200, taken.text
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        holder.close()
