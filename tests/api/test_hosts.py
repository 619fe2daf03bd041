"""The Host check both servers make against DNS rebinding (`ctxr.api.hosts`).

Before, `ctxr serve` on loopback with no token answered a request for `Host: evil.rebind.example`
with 200 and hits: a page that rebinds its own name to 127.0.0.1 could read the whole index.
`ctxr mcp --http` answered 421 only through the SDK's own list, which knew no configured name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxr.api.app import owning_server
from ctxr.api.hosts import HostPolicy
from tests.fixtures.index import BuiltIndex
from tests.fixtures.servers import HOST, MCP_ACCEPT, MCP_HELLO, running, serving_mcp

EVIL = "evil.rebind.example"


@pytest.fixture(scope="module")
def served(examples_index: BuiltIndex, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # A copy: the server that owns it writes its owner file there.
    copy = examples_index.copy_to(tmp_path_factory.mktemp("hosts") / "idx")
    settings = examples_index.settings_with(index_dir=copy, api_allowed_hosts="search.lan")
    server, sock = owning_server(settings, HOST, 0)  # `ctxr serve`'s own server
    with running(server, [sock]) as port:
        yield f"http://{HOST}:{port}"


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
    with serving_mcp(examples_index.settings_with(api_allowed_hosts="agents.lan")) as url:
        refused = httpx.post(url, json=MCP_HELLO, headers={**MCP_ACCEPT, "Host": EVIL})
        assert refused.status_code == 421 and "CTXR_API_ALLOWED_HOSTS" in refused.text
        taken = httpx.post(url, json=MCP_HELLO, headers={**MCP_ACCEPT, "Host": "agents.lan:9"})
        assert taken.status_code == 200, taken.text
